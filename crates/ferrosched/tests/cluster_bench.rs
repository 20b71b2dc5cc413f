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

/// Runs `ferrosched bench --kubeconfig KUBECONFIG ARGS...`, expecting failure; its stderr.
async fn bench_fails(kubeconfig: std::path::PathBuf, args: &str) -> String {
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
    assert!(
        !out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Requests of `verb` on PodGroups (`subresource` "" or "status") in namespace `ns`.
fn pod_group_requests(server: &FakeApiServer, verb: &str, subresource: &str, ns: &str) -> usize {
    server
        .requests()
        .iter()
        .filter(|r| {
            (r.verb.as_str(), r.group.as_str(), r.resource.as_str())
                == (verb, "scheduling.k8s.io", "podgroups")
                && r.subresource == subresource
                && r.namespace == ns
        })
        .count()
}

/// GangScheduling against an API server: one PodGroup per group is created before its pods
/// (labelled with the run), the scheduler places the gangs and writes their condition (so
/// the groups existed while it scheduled), every pod is bound once, the group latency is
/// reported, and cleanup removes the PodGroups with everything else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gang_scheduling_creates_its_pod_groups_and_cleans_them_up() {
    let server = FakeApiServer::start().await;
    let report = bench_json(
        server.kubeconfig(),
        "--workload GangScheduling --nodes 10 --init-pods 3 --pods 9 --pods-per-group 3 -o json --stall-timeout 20",
    )
    .await;
    let r = &report.as_array().unwrap()[0];
    assert_eq!(r["workload"], "GangScheduling");
    assert_eq!(r["complete"], true, "{r}");
    assert_eq!(
        (r["initScheduled"].as_u64(), r["scheduled"].as_u64()),
        (Some(3), Some(9))
    );
    assert_eq!(r["podsPerGroup"], 3);
    assert_eq!(r["groupLatency"]["groups"], 3, "{r}");
    assert!(r["groupLatency"]["p99Ms"].as_f64().unwrap() > 0.0, "{r}");

    let ns = r["namespace"].as_str().unwrap();
    // One init group and three measured ones, each created once; each got its condition.
    assert_eq!(pod_group_requests(&server, "create", "", ns), 4);
    assert!(pod_group_requests(&server, "patch", "status", ns) >= 4);
    let mut per_pod: BTreeMap<String, usize> = BTreeMap::new();
    for (pod, _) in server.bindings() {
        *per_pod.entry(pod).or_default() += 1;
    }
    assert_eq!(per_pod.len(), 12, "{per_pod:?}");
    assert!(per_pod.values().all(|&n| n == 1), "{per_pod:?}");
    for collection in [
        "pods",
        "podgroups",
        "nodes",
        "namespaces",
        "priorityclasses",
    ] {
        assert_eq!(server.list(collection), Vec::<Value>::new(), "{collection}");
    }
}

/// A server that does not serve PodGroups (as 1.35 and older): a group workload is refused
/// before anything is created, in one line naming the API and the server's version, and
/// the other workloads of the invocation do not run either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_pod_groups_refuses_group_workloads_before_creating_anything() {
    let server = FakeApiServer::start().await;
    server.disable("podgroups");
    let stderr = bench_fails(
        server.kubeconfig(),
        "--workload SchedulingBasic --workload GangScheduling --nodes 5 --pods 3",
    )
    .await;
    let line = stderr
        .lines()
        .find(|l| l.starts_with("error: "))
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!(
        line.contains(
            "GangScheduling needs PodGroups (scheduling.k8s.io/v1beta1 or v1alpha2 podgroups)"
        ),
        "{line}"
    );
    assert!(line.contains(fake_apiserver::VERSION), "{line}");
    let writes: Vec<_> = server
        .requests()
        .into_iter()
        .filter(|r| !matches!(r.verb.as_str(), "get" | "list" | "watch"))
        .collect();
    assert!(writes.is_empty(), "{writes:?}");
    assert!(!stderr.contains("running "), "{stderr}");
}

/// GangPreemptionPodGroups against an API server: the low-priority gangs fill the nodes, the
/// scheduler preempts them for the high-priority gangs, and every measured pod is bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn high_priority_gangs_preempt_low_priority_gangs_against_an_api_server() {
    let server = FakeApiServer::start().await;
    let report = bench_json(
        server.kubeconfig(),
        "--workload GangPreemptionPodGroups --nodes 4 --pods 4 --pods-per-group 2 -o json --stall-timeout 20",
    )
    .await;
    let r = &report.as_array().unwrap()[0];
    assert_eq!(r["complete"], true, "{r}");
    // Five low-priority pods per node, whatever --init-pods says.
    assert_eq!(
        (r["initScheduled"].as_u64(), r["scheduled"].as_u64()),
        (Some(20), Some(4))
    );
    assert_eq!(r["groupLatency"]["groups"], 2, "{r}");
    let ns = r["namespace"].as_str().unwrap();
    assert_eq!(pod_group_requests(&server, "create", "", ns), 10 + 2);
    // The victims were deleted by the scheduler, before cleanup.
    let deletes = server
        .requests()
        .iter()
        .filter(|q| q.verb == "delete" && q.resource == "pods" && q.namespace == ns)
        .count();
    assert!(deletes >= 4, "{deletes} pod deletions");
    for collection in ["pods", "podgroups", "nodes", "namespaces"] {
        assert_eq!(server.list(collection), Vec::<Value>::new(), "{collection}");
    }
}

/// `--heartbeats`: while the measured pods are scheduled, the server gets the run's node
/// status PATCHes round robin (each keeping the nodes Ready), the report gives the rate
/// achieved, and every pod is still bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_heartbeat_storm_patches_node_status_during_the_measured_phase() {
    let server = FakeApiServer::start().await;
    let report = bench_json(
        server.kubeconfig(),
        "--workload SchedulingBasic --nodes 10 --init-pods 10 --pods 100 --heartbeats 100 -o json --stall-timeout 60",
    )
    .await;
    let r = &report.as_array().unwrap()[0];
    assert_eq!(r["complete"], true, "{r}");
    assert_eq!(r["scheduled"], 100, "{r}");
    let h = &r["heartbeats"];
    assert_eq!(h["requestedPerSecond"], 100.0, "{r}");
    assert_eq!(h["failed"], 0, "{r}");
    let sent = h["sent"].as_u64().unwrap();
    assert!(sent > 0, "{r}");
    assert!(h["achievedPerSecond"].as_f64().unwrap() > 0.0, "{r}");
    let patches: BTreeMap<String, usize> = server
        .requests()
        .iter()
        .filter(|q| q.verb == "patch" && q.resource == "nodes" && q.subresource == "status")
        .fold(BTreeMap::new(), |mut m, q| {
            *m.entry(q.name.clone()).or_default() += 1;
            m
        });
    // The node status PATCHes the run makes besides (restoring status after create) are
    // at most one per node.
    let total: usize = patches.values().sum();
    assert!(total as u64 >= sent, "{total} < {sent}: {patches:?}");
    // Round robin: with 10 nodes, no node got more than its share plus the restore.
    if sent >= 10 {
        let most = patches.values().max().copied().unwrap_or(0) as u64;
        assert!(most <= sent / 10 + 2, "{patches:?}");
    }
}

/// The heartbeat flags refuse what cannot work, naming the flag.
#[test]
fn heartbeat_flags_refuse_bad_combinations() {
    let fails = |args: &[&str], expect: &str| {
        let out = Command::new(BIN).arg("bench").args(args).output().unwrap();
        assert!(!out.status.success(), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(expect), "{args:?}: {stderr}");
    };
    // A rate is for a run against an API server.
    fails(&["--heartbeats", "500"], "--kubeconfig");
    fails(
        &["--kubeconfig", "/nonexistent", "--heartbeats", "0"],
        "a number above 0",
    );
    fails(
        &["--kubeconfig", "/nonexistent", "--heartbeats-per-pod", "5"],
        "cannot be used with",
    );
    fails(
        &[
            "--workload",
            "Churn",
            "--heartbeats-per-pod",
            "5",
            "--nodes",
            "5",
        ],
        "--heartbeats-per-pod: Churn",
    );
}
