//! One output flag everywhere: `-o table|json|yaml` on simulate, bench and config print.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_ferrosched");

fn run(args: &[&str]) -> (String, String) {
    let o = Command::new(BIN).args(args).output().unwrap();
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout).to_string(),
        String::from_utf8_lossy(&o.stderr).to_string(),
    );
    assert!(o.status.success(), "{args:?}: {err}");
    (out, err)
}

#[test]
fn config_print_as_yaml_json_and_table() {
    let (yaml, _) = run(&["config", "print"]);
    assert!(
        yaml.starts_with("apiVersion: kubescheduler.config.k8s.io/v1\n"),
        "{yaml}"
    );
    let (json, _) = run(&["config", "print", "-o", "json"]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["kind"], "KubeSchedulerConfiguration");
    assert_eq!(v["profiles"][0]["schedulerName"], "default-scheduler");
    let (table, _) = run(&["config", "print", "-o", "table"]);
    assert!(table.starts_with("PROFILE "), "{table}");
    assert!(
        table.lines().any(|l| l.starts_with("default-scheduler")
            && l.contains("Score")
            && l.contains("TaintToleration:3")),
        "{table}"
    );
}

const SMALL: [&str; 8] = [
    "bench",
    "--workload",
    "SchedulingBasic",
    "--nodes",
    "50",
    "--init-pods",
    "5",
    "--measured-pods",
];

#[test]
fn bench_output_flag_and_the_deprecated_json_alias() {
    let args = |extra: &[&'static str]| {
        let mut a: Vec<&str> = SMALL.to_vec();
        a.push("5");
        a.extend_from_slice(extra);
        a
    };
    let (json, _) = run(&args(&["-o", "json"]));
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v[0]["workload"], "SchedulingBasic");
    assert_eq!(v[0]["scheduled"], 5);
    let (yaml, _) = run(&args(&["-o", "yaml"]));
    assert!(yaml.contains("workload: SchedulingBasic"), "{yaml}");
    let (old, err) = run(&args(&["--json"]));
    assert!(err.contains("--json is deprecated; use -o json"), "{err}");
    let v: serde_json::Value = serde_json::from_str(&old).unwrap();
    assert_eq!(v[0]["nodes"], 50);
    let (table, _) = run(&args(&[]));
    assert!(table.starts_with("WORKLOAD "), "{table}");
}

/// `--bound-pods`: loaded from lists before scheduling, reported with start-up and memory
/// figures (values depend on the machine; their presence and the counts do not).
#[test]
fn bench_reports_start_up_from_lists_with_bound_pods() {
    let mut a: Vec<&str> = SMALL.to_vec();
    a.extend_from_slice(&["5", "--bound-pods", "200"]);
    let (table, _) = run(&a);
    assert!(
        table.contains("start-up from lists") && table.contains("(200 bound pods:"),
        "{table}"
    );
    a.extend_from_slice(&["-o", "json"]);
    let (json, _) = run(&a);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v[0]["scheduled"], 5);
    let st = &v[0]["startup"];
    assert_eq!(st["boundPods"], 200);
    assert!(st["startupMs"].as_f64().unwrap() > 0.0, "{st}");
    assert!(st["snapshotUpdateMicros"].as_f64().unwrap() > 0.0, "{st}");
}

#[test]
fn simulate_output_flag() {
    let (json, _) = run(&["simulate", "-o", "json"]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert!(v["outcomes"].is_array());
    let (yaml, _) = run(&["simulate", "-o", "yaml"]);
    assert!(yaml.starts_with("outcomes:\n"), "{yaml}");
}

/// The DRA workload runs in memory (every pod placed, the table widened to its name) and
/// is refused against an API server with the workloads that can run there.
#[test]
fn dra_bench_workload_in_memory_and_refused_with_kubeconfig() {
    let (json, _) = run(&[
        "bench",
        "--workload",
        "SchedulingWithResourceClaimTemplate",
        "--nodes",
        "4",
        "--init-pods",
        "8",
        "--measured-pods",
        "24",
        "-o",
        "json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v[0]["workload"], "SchedulingWithResourceClaimTemplate");
    // 4 nodes x 8 devices: 8 init pods leave room for exactly 24.
    assert_eq!(v[0]["scheduled"], 24);

    let err = refused_with_kubeconfig("SchedulingWithResourceClaimTemplate");
    assert!(
        err.contains("workload \"SchedulingWithResourceClaimTemplate\" runs in memory only; drop --kubeconfig or choose one of: SchedulingBasic,"),
        "{err}"
    );
    assert!(!err.contains("choose one of: SchedulingBasic, NodeAffinity, PodAntiAffinity, PodAffinity, TopologySpreading, PreemptionBasic, MixedProfiles, SchedulingWith"), "{err}");
    // The group workloads run against an API server too.
    assert!(
        err.contains(
            "GangScheduling, BasicScheduling, TopologyAwareScheduling, GangPreemptionPodGroups"
        ),
        "{err}"
    );
}

/// The workload-scheduling workloads run in memory with the gang size asked for (a gang's
/// attempt is its pod group cycle).
#[test]
fn gang_bench_workloads_in_memory_with_a_gang_size() {
    for name in [
        "GangScheduling",
        "BasicScheduling",
        "TopologyAwareScheduling",
    ] {
        let (json, _) = run(&[
            "bench",
            "--workload",
            name,
            "--nodes",
            "200",
            "--init-pods",
            "10",
            "--measured-pods",
            "20",
            "--pods-per-group",
            "10",
            "-o",
            "json",
        ]);
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v[0]["workload"], name);
        assert_eq!(v[0]["scheduled"], 20, "{name}");
        assert_eq!(v[0]["podsPerGroup"], 10, "{name}");
    }
    let (table, _) = run(&[
        "bench",
        "--workload",
        "GangScheduling",
        "--nodes",
        "10",
        "--init-pods",
        "0",
        "--measured-pods",
        "6",
    ]);
    assert!(table.contains("PODS/GROUP"), "{table}");
    let row = table
        .lines()
        .find(|l| l.starts_with("GangScheduling"))
        .unwrap();
    assert!(
        row.trim_end().ends_with(" 3"),
        "the default gang size: {table}"
    );
}

/// GangPreemptionPodGroups in memory: five low-priority pods per node whatever --init-pods
/// says, every measured gang placed after preemption (two attempts per gang); more
/// measured pods than nodes is refused before anything runs.
#[test]
fn gang_preemption_bench_in_memory_and_its_sizes() {
    let (json, _) = run(&[
        "bench",
        "--workload",
        "GangPreemptionPodGroups",
        "--nodes",
        "20",
        "--init-pods",
        "3",
        "--measured-pods",
        "20",
        "--pods-per-group",
        "5",
        "-o",
        "json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v[0]["workload"], "GangPreemptionPodGroups");
    assert_eq!(v[0]["initPods"], 100);
    assert_eq!(v[0]["scheduled"], 20, "{v}");
    assert_eq!(v[0]["podsPerGroup"], 5);

    let o = Command::new(BIN)
        .args(["bench", "--workload", "GangPreemptionPodGroups"])
        .args(["--nodes", "20", "--nodes", "30", "--measured-pods", "30"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("error: GangPreemptionPodGroups places one measured pod per node: 30 measured pods need at least 30 nodes, not 20"),
        "{err}"
    );
    assert!(!err.contains("running "), "refused before running: {err}");
}

/// `bench --kubeconfig` with `workload`, which must fail before touching a cluster: its stderr.
fn refused_with_kubeconfig(workload: &str) -> String {
    let o = Command::new(BIN)
        .args([
            "bench",
            "--kubeconfig",
            "/nonexistent",
            "--workload",
            workload,
        ])
        .output()
        .unwrap();
    assert!(!o.status.success());
    String::from_utf8_lossy(&o.stderr).to_string()
}
