//! `ferrosched bench`: scheduler_perf-like workloads, generated in memory and scheduled
//! through the real framework. Each workload runs in its own process so peak RSS is its own.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Duration;

use clap::Args;

use super::output::Output;
use ferrosched::cluster_bench::{
    self, BenchError, BenchOptions, ClusterBenchResult, SchedulerUnderTest,
};
use scheduler_core::bench_workloads::{
    self, CHURN_WORKLOADS, DRA_WORKLOAD, ExplainMode, GROUP_WORKLOADS, IDENTICAL_WORKLOADS,
    WORKLOADS,
};

/// Workloads run in memory only, reported with attempts per scheduled pod.
fn in_memory_only(name: &str) -> bool {
    CHURN_WORKLOADS.contains(&name) || IDENTICAL_WORKLOADS.contains(&name)
}

/// Workloads the cluster bench (`--kubeconfig`) cannot run. (The identical-pods workloads
/// run there too: batching is turned off with the OpportunisticBatching feature gate; the
/// group workloads create their PodGroups.)
fn cluster_unsupported(name: &str) -> bool {
    CHURN_WORKLOADS.contains(&name) || name == DRA_WORKLOAD
}

/// Every workload `bench` knows.
fn known_workloads() -> impl Iterator<Item = &'static str> {
    WORKLOADS
        .iter()
        .chain(GROUP_WORKLOADS)
        .chain(CHURN_WORKLOADS)
        .chain(IDENTICAL_WORKLOADS)
        .copied()
}
use serde::{Deserialize, Serialize};

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Workloads to run (default: all). One of: SchedulingBasic, NodeAffinity,
    /// PodAntiAffinity, PodAffinity, TopologySpreading, PreemptionBasic, MixedProfiles,
    /// SchedulingWithResourceClaimTemplate (DRA: 8 devices per node, one claim per pod; in
    /// memory only), GangScheduling, BasicScheduling, TopologyAwareScheduling (pods in
    /// PodGroups: gangs placed all or nothing in one pod group cycle, basic groups pod by
    /// pod, gangs kept to one rack of 100 nodes; see --pods-per-group),
    /// GangPreemptionPodGroups (5 low-priority pods per node in gangs, then the measured
    /// high-priority gangs, each pod needing a node with no low-priority pod left: at most
    /// one measured pod per node; --init-pods is ignored), GangPreemptionTopologySpreading
    /// (10 low-priority 300m pods per node, then high-priority gangs of 3970m pods spreading
    /// over three zones), PreemptionPodGroupDisruptionMode/NoPodGroup,
    /// PreemptionPodGroupDisruptionMode/PodGroup_DisruptionSingle,
    /// PreemptionPodGroupDisruptionMode/PodGroup_DisruptionAll (the same victims alone or in
    /// PodGroups of --pods-per-group in that disruption mode; single high-priority 3970m pods
    /// that each need a whole node; for these three too, --init-pods is ignored and at most one
    /// measured pod per node), Churn, ChurnWithoutOldNode,
    /// ChurnWithoutHints (in memory only; report attempts per scheduled pod), IdenticalPods,
    /// IdenticalPodsWithoutBatching (one pod per node, opportunistic batching on and off).
    /// With --kubeconfig the group workloads create their PodGroups (scheduling.k8s.io
    /// v1beta1, else v1alpha2) and are refused by a server serving neither.
    #[arg(long = "workload", value_name = "NAME")]
    workloads: Vec<String>,
    /// Pods per PodGroup in the group workloads (default: upstream's podsPerGroup, 3; 4
    /// for TopologyAwareScheduling, 10 for GangPreemptionPodGroups and the victims' groups of
    /// PreemptionPodGroupDisruptionMode, 16 for GangPreemptionTopologySpreading). A gang's minCount is
    /// its size.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pods_per_group: Option<u64>,
    /// Node counts to run each workload at.
    #[arg(long = "nodes", value_name = "N", default_values_t = [500usize, 5000])]
    nodes: Vec<usize>,
    /// Pods scheduled before measuring.
    #[arg(long, default_value_t = 1000)]
    init_pods: usize,
    /// In memory: pods already bound (round robin over the nodes) loaded from lists before
    /// the init pods, as the scheduler starts on a running cluster; reports start-up from
    /// lists, memory per node and per bound pod, and the snapshot's cost.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 0,
        conflicts_with = "kubeconfig"
    )]
    bound_pods: usize,
    /// Pods measured.
    #[arg(long, visible_alias = "pods", default_value_t = 1000)]
    measured_pods: usize,
    /// Output format.
    #[arg(long, short, value_enum, default_value_t = Output::Table)]
    output: Output,
    /// In memory: measure what explanations cost. `run` (the default when the flag is given
    /// alone): every attempt recorded compactly and the unschedulable ones rendered, as
    /// `run --explain` does; `full`: every attempt rendered, as `simulate --explain` does.
    #[arg(long, value_enum, num_args = 0..=1, default_missing_value = "run", conflicts_with = "kubeconfig")]
    explain: Option<BenchExplain>,
    /// Deprecated: use `-o json`.
    #[arg(long, hide = true)]
    json: bool,
    /// Internal: run exactly one workload in this process and print one JSON line.
    #[arg(long, hide = true)]
    child: bool,
    /// Bench against this API server instead of in memory, the way scheduler_perf does:
    /// fake Nodes and pending pods are created there and `ferrosched run` schedules them
    /// as a child process.
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// In memory: every cycle also calls a loopback no-op extender (filter and prioritize
    /// verbs, it keeps every node and scores none) over HTTP, sending node names only
    /// (`names`, nodeCacheCapable) or whole nodes (`nodes`).
    #[arg(long, value_enum, value_name = "SENT", conflicts_with = "kubeconfig")]
    extender_noop: Option<NoopExtender>,
    /// With --kubeconfig: leave the run's nodes, namespace and pods in the cluster.
    #[arg(long, requires = "kubeconfig")]
    keep: bool,
    /// With --kubeconfig: report partial results when no pod was bound for this many
    /// seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 30)]
    stall_timeout: u64,
    /// With --kubeconfig: after each ferrosched run, run the same workload on the same
    /// server with this upstream kube-scheduler binary as the scheduler, and report both
    /// side by side with ferrosched's ratios.
    #[arg(long, value_name = "PATH", requires = "kubeconfig")]
    kube_scheduler: Option<PathBuf>,
    /// With --kubeconfig: also measure the API server's ceiling: the same nodes and pods,
    /// no scheduler, the driver POSTs a Binding for every pod (round robin over the nodes)
    /// through ferrosched's own client and Binding call, qps/burst 5000, 128 at once.
    /// Reported as a `binding-ceiling` row.
    #[arg(long, requires = "kubeconfig")]
    binding_ceiling: bool,
    /// With --kubeconfig: create the measured pods while no scheduler runs (the scheduler
    /// binds the init pods, stops, the measured pods are created, a fresh scheduler
    /// process schedules them), so the driver's create rate does not bound pods/s. CPU
    /// and peak RSS are then that process's whole life, start-up lists included.
    #[arg(long, requires = "kubeconfig")]
    pods_first: bool,
    /// With --kubeconfig: the ferrosched binary to run as the scheduler (default: this
    /// one), e.g. another build to compare.
    #[arg(long, value_name = "PATH", requires = "kubeconfig")]
    ferrosched: Option<PathBuf>,
    /// With --kubeconfig: concurrent create requests.
    #[arg(long, value_name = "N", default_value_t = 32)]
    concurrency: usize,
    /// With --kubeconfig: a kubelet heartbeat storm while the measured pods are created
    /// and scheduled: RATE node status PATCHes per second (the Ready condition's
    /// lastHeartbeatTime, strategic merge) round robin over the run's nodes, from a client
    /// of its own, at most 64 in flight. A kubelet reports every 10 s: 50,000 nodes make
    /// 5,000 per second. The report gives the rate achieved.
    #[arg(long, value_name = "RATE", requires = "kubeconfig", value_parser = positive_rate)]
    heartbeats: Option<f64>,
    /// In memory: K heartbeat-only node updates (round robin over the nodes, each with a
    /// kubelet's four conditions and 20 images) before every measured attempt, through the
    /// node informer's update path; their time counts in us/pod. 0 gives the same nodes
    /// without heartbeats, to compare with.
    #[arg(long, value_name = "K", conflicts_with = "kubeconfig")]
    heartbeats_per_pod: Option<usize>,
    /// Internal: every heartbeat reaches the cache (the path before heartbeats were
    /// dropped early), to measure what it cost.
    #[arg(long, hide = true, requires = "heartbeats_per_pod")]
    heartbeats_unfiltered: bool,
}

/// `--heartbeats`: a rate above 0.
fn positive_rate(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(r) if r > 0.0 && r.is_finite() => Ok(r),
        _ => Err(format!(
            "{s:?} is not a rate: give heartbeats per second, a number above 0 (e.g. 500)"
        )),
    }
}

#[derive(Serialize, Deserialize, Debug, Clone)]
#[serde(rename_all = "camelCase")]
pub struct BenchResult {
    pub workload: String,
    pub nodes: usize,
    pub init_pods: usize,
    pub measured_pods: usize,
    pub scheduled: usize,
    pub pods_per_second: f64,
    pub micros_per_pod: f64,
    pub p50_attempt_micros: f64,
    pub p99_attempt_micros: f64,
    pub peak_rss_mib: f64,
    /// Churn workloads: scheduling attempts per scheduled pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempts_per_pod: Option<f64>,
    /// Group workloads: pods per PodGroup. A gang's attempt (P50, P99) is its whole pod
    /// group cycle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pods_per_group: Option<usize>,
    /// Start-up from lists and memory (workloads scheduled by the runner).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub startup: Option<StartupResult>,
    /// `--heartbeats-per-pod`: the heartbeats between the measured attempts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heartbeats: Option<HeartbeatResult>,
}

/// Heartbeat-only node updates between the measured attempts, in memory.
#[derive(Serialize, Deserialize, Debug, Clone, Default)]
#[serde(rename_all = "camelCase")]
pub struct HeartbeatResult {
    pub per_pod: usize,
    pub applied: u64,
    /// Updates that changed the cache (0: every heartbeat dropped before it).
    pub reached_cache: u64,
    pub micros_per_heartbeat: f64,
    /// Every heartbeat was sent to the cache (the path before they were dropped early).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unfiltered: bool,
}

/// Start-up from lists, memory per object (resident memory deltas, so allocator slack
/// included) and the snapshot's cost, in memory.
#[derive(Serialize, Deserialize, Debug, Clone, Default)]
#[serde(rename_all = "camelCase")]
pub struct StartupResult {
    pub bound_pods: usize,
    /// Nodes and bound pods into the cache (views built), then the first snapshot.
    pub startup_ms: f64,
    pub load_nodes_ms: f64,
    pub load_pods_ms: f64,
    pub first_snapshot_ms: f64,
    /// Resident memory the nodes added, per node.
    pub bytes_per_node: Option<f64>,
    /// Resident memory the bound pods added, per pod.
    pub bytes_per_pod: Option<f64>,
    /// Resident memory the first snapshot added.
    pub snapshot_mib: Option<f64>,
    /// Resident memory after start-up.
    pub startup_rss_mib: Option<f64>,
    /// Mean time of one snapshot update in the measured attempts.
    pub snapshot_update_micros: f64,
}

impl BenchArgs {
    /// `-o`, or JSON for the deprecated `--json`.
    fn format(&self) -> Output {
        if self.json {
            eprintln!("warning: --json is deprecated; use -o json");
            return Output::Json;
        }
        self.output
    }

    /// Whether `name` makes sense at every node count asked for: the reason when not.
    fn sizes_fit(&self, name: &str) -> Result<(), String> {
        let per_group = self.pods_per_group.map(|n| n as usize);
        self.nodes.iter().try_for_each(|&nodes| {
            bench_workloads::check_group_sizes(name, nodes, self.measured_pods, per_group)
        })
    }
}

pub fn run(args: &BenchArgs) -> ExitCode {
    let names: Vec<String> = if args.workloads.is_empty() {
        // Against a cluster: every workload it can run; and only at sizes it makes sense at.
        known_workloads()
            .filter(|w| args.kubeconfig.is_none() || !cluster_unsupported(w))
            .filter(|w| match args.sizes_fit(w) {
                Ok(()) => true,
                Err(e) => {
                    eprintln!("skipping {w}: {e}");
                    false
                }
            })
            .map(|s| s.to_string())
            .collect()
    } else {
        args.workloads.clone()
    };
    for n in &names {
        if !known_workloads().any(|w| w == n) {
            let known: Vec<&str> = known_workloads().collect();
            eprintln!("unknown workload {n:?}; known: {}", known.join(", "));
            return ExitCode::FAILURE;
        }
        if let Err(e) = args.sizes_fit(n) {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    }
    if args.heartbeats_per_pod.is_some()
        && let Some(n) = names.iter().find(|n| in_memory_only(n))
    {
        eprintln!(
            "error: --heartbeats-per-pod: {n} schedules in a loop of its own without heartbeats; drop it from --workload or drop --heartbeats-per-pod"
        );
        return ExitCode::FAILURE;
    }
    if let Some(kubeconfig) = &args.kubeconfig {
        if let Some(n) = names.iter().find(|n| cluster_unsupported(n)) {
            let cluster: Vec<&str> = WORKLOADS
                .iter()
                .chain(GROUP_WORKLOADS)
                .chain(IDENTICAL_WORKLOADS)
                .copied()
                .filter(|w| !cluster_unsupported(w))
                .collect();
            eprintln!(
                "workload {n:?} runs in memory only; drop --kubeconfig or choose one of: {}",
                cluster.join(", ")
            );
            return ExitCode::FAILURE;
        }
        return cluster(args, &names, kubeconfig);
    }
    if args.child {
        let (Some(name), Some(&nodes)) = (names.first(), args.nodes.first()) else {
            return ExitCode::FAILURE;
        };
        let r = run_one(
            name,
            nodes,
            args.bound_pods,
            args.init_pods,
            args.measured_pods,
            args.pods_per_group.map(|n| n as usize),
            args.explain.map_or(ExplainMode::Off, BenchExplain::mode),
            args.extender_noop,
            args.heartbeats_per_pod
                .map(|per_pod| bench_workloads::HeartbeatLoad {
                    per_pod,
                    unfiltered: args.heartbeats_unfiltered,
                }),
        );
        println!("{}", serde_json::to_string(&r).expect("serializes"));
        return ExitCode::SUCCESS;
    }
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("cannot find own executable to run workloads: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut results = Vec::new();
    for name in &names {
        for &nodes in &args.nodes {
            eprintln!("running {name} on {nodes} nodes ...");
            let out = Command::new(&exe)
                .args([
                    "bench",
                    "--child",
                    "--workload",
                    name,
                    "--nodes",
                    &nodes.to_string(),
                ])
                .args(["--init-pods", &args.init_pods.to_string()])
                .args(["--bound-pods", &args.bound_pods.to_string()])
                .args(["--measured-pods", &args.measured_pods.to_string()])
                .args(args.pods_per_group.map(|n| format!("--pods-per-group={n}")))
                .args(args.explain.map(|e| format!("--explain={}", e.name())))
                .args(
                    args.extender_noop
                        .map(|e| format!("--extender-noop={}", e.name())),
                )
                .args(
                    args.heartbeats_per_pod
                        .map(|k| format!("--heartbeats-per-pod={k}")),
                )
                .args(
                    args.heartbeats_unfiltered
                        .then_some("--heartbeats-unfiltered"),
                )
                .output();
            match out {
                Ok(o) if o.status.success() => {
                    match serde_json::from_slice::<BenchResult>(&o.stdout) {
                        Ok(r) => results.push(r),
                        Err(e) => eprintln!("{name}/{nodes}: unreadable result: {e}"),
                    }
                }
                Ok(o) => eprintln!(
                    "{name}/{nodes}: failed: {}",
                    String::from_utf8_lossy(&o.stderr)
                ),
                Err(e) => eprintln!("{name}/{nodes}: cannot start: {e}"),
            }
        }
    }
    match args.format().serialize(&results) {
        Some(text) => print!("{text}"),
        None => print!("{}", table(&results)),
    }
    if results.len() == names.len() * args.nodes.len() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum NoopExtender {
    Names,
    Nodes,
}

impl NoopExtender {
    fn name(self) -> &'static str {
        match self {
            NoopExtender::Names => "names",
            NoopExtender::Nodes => "nodes",
        }
    }
}

/// The loopback no-op extender (`--extender-noop`) and the runtime serving and calling it.
fn noop_extender(
    sent: NoopExtender,
) -> std::io::Result<(
    tokio::runtime::Runtime,
    Vec<std::sync::Arc<dyn scheduler_core::framework::Extender>>,
)> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    listener.set_nonblocking(true)?;
    let port = listener.local_addr()?.port();
    let listener = {
        let _guard = rt.enter();
        tokio::net::TcpListener::from_std(listener)?
    };
    rt.spawn(controller::extender::serve_noop(listener));
    let cfg = scheduler_core::config::Extender {
        url_prefix: format!("http://127.0.0.1:{port}"),
        filter_verb: "filter".into(),
        prioritize_verb: "prioritize".into(),
        weight: 1,
        node_cache_capable: sent == NoopExtender::Names,
        http_timeout: scheduler_core::config::DEFAULT_EXTENDER_TIMEOUT,
        ..Default::default()
    };
    let built = controller::extender::build_extenders(&[cfg], rt.handle())
        .map_err(std::io::Error::other)?;
    Ok((rt, controller::extender::as_core(&built)))
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum BenchExplain {
    Run,
    Full,
}

impl BenchExplain {
    fn mode(self) -> ExplainMode {
        match self {
            BenchExplain::Run => ExplainMode::Run,
            BenchExplain::Full => ExplainMode::Full,
        }
    }

    fn name(self) -> &'static str {
        match self {
            BenchExplain::Run => "run",
            BenchExplain::Full => "full",
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn run_one(
    name: &str,
    nodes: usize,
    bound: usize,
    init: usize,
    measured: usize,
    pods_per_group: Option<usize>,
    explain: ExplainMode,
    extender: Option<NoopExtender>,
    heartbeats: Option<bench_workloads::HeartbeatLoad>,
) -> BenchResult {
    if in_memory_only(name) {
        let s = match name {
            "IdenticalPods" | "IdenticalPodsWithoutBatching" => {
                bench_workloads::run_identical(nodes, measured, name == "IdenticalPods")
            }
            _ => bench_workloads::run_churn(
                nodes,
                measured,
                bench_workloads::ChurnHints::of_workload(name),
            ),
        };
        let micros = s.elapsed.as_secs_f64() * 1e6 / s.scheduled.max(1) as f64;
        return BenchResult {
            workload: name.to_string(),
            nodes,
            init_pods: 0,
            measured_pods: s.pods,
            scheduled: s.scheduled,
            pods_per_second: s.pods_per_second(),
            micros_per_pod: micros,
            p50_attempt_micros: 0.0,
            p99_attempt_micros: 0.0,
            peak_rss_mib: peak_rss_mib(),
            attempts_per_pod: Some(s.attempts_per_scheduled_pod()),
            pods_per_group: None,
            startup: None,
            heartbeats: None,
        };
    }
    let w = bench_workloads::build(name, nodes, init, measured)
        .or_else(|| bench_workloads::build_group(name, nodes, init, measured, pods_per_group))
        .expect("known workload");
    let (s, mut workload) = match extender {
        None => (
            bench_workloads::run_from_lists(&w, bound, explain, &mut rss_bytes, &[], heartbeats),
            name.to_string(),
        ),
        Some(sent) => {
            let (rt, extenders) = noop_extender(sent).expect("loopback extender starts");
            let s = bench_workloads::run_from_lists(
                &w,
                bound,
                explain,
                &mut rss_bytes,
                &extenders,
                heartbeats,
            );
            drop(extenders);
            rt.shutdown_background();
            (s, format!("{name}+extender({})", sent.name()))
        }
    };
    if let Some(load) = heartbeats {
        let how = if load.unfiltered { ", unfiltered" } else { "" };
        workload = format!("{workload}+heartbeats({}/pod{how})", load.per_pod);
    }
    let st = &s.startup;
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    let startup = StartupResult {
        bound_pods: st.bound_pods,
        startup_ms: ms(st.total()),
        load_nodes_ms: ms(st.load_nodes),
        load_pods_ms: ms(st.load_pods),
        first_snapshot_ms: ms(st.first_snapshot),
        bytes_per_node: st.bytes_per_node(),
        bytes_per_pod: st.bytes_per_pod(),
        snapshot_mib: st.snapshot_bytes().map(mib),
        startup_rss_mib: st.memory[3].map(mib),
        snapshot_update_micros: s.snapshot_update_time.as_secs_f64() * 1e6
            / s.snapshot_updates.max(1) as f64,
    };
    BenchResult {
        workload,
        nodes,
        init_pods: w.init_pods.len(),
        measured_pods: s.measured,
        scheduled: s.scheduled,
        pods_per_second: s.pods_per_second(),
        micros_per_pod: s.elapsed.as_secs_f64() * 1e6 / s.measured.max(1) as f64,
        p50_attempt_micros: s.percentile(0.50).as_secs_f64() * 1e6,
        p99_attempt_micros: s.percentile(0.99).as_secs_f64() * 1e6,
        peak_rss_mib: peak_rss_mib(),
        attempts_per_pod: None,
        pods_per_group: w.pods_per_group,
        startup: Some(startup),
        heartbeats: s.heartbeats.map(|h| HeartbeatResult {
            per_pod: h.per_pod,
            applied: h.applied,
            reached_cache: h.reached_cache,
            micros_per_heartbeat: h.micros_per_heartbeat,
            unfiltered: heartbeats.is_some_and(|l| l.unfiltered),
        }),
    }
}

/// VmRSS from /proc/self/status (Linux), in bytes.
fn rss_bytes() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let kb = s.lines().find(|l| l.starts_with("VmRSS:"))?;
    Some(kb.split_whitespace().nth(1)?.parse::<u64>().ok()? * 1024)
}

/// VmHWM from /proc/self/status (Linux); 0 elsewhere.
fn peak_rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmHWM:")).and_then(|l| {
                l.split_whitespace()
                    .nth(1)
                    .and_then(|kb| kb.parse::<f64>().ok())
            })
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

fn table(results: &[BenchResult]) -> String {
    let mut out = String::new();
    let w = results
        .iter()
        .map(|r| r.workload.len())
        .fold(18, usize::max);
    let _ = writeln!(
        out,
        "{:<w$} {:>6} {:>6} {:>9} {:>10} {:>9} {:>9} {:>9} {:>8} {:>9} {:>10}",
        "WORKLOAD",
        "NODES",
        "INIT",
        "SCHEDULED",
        "PODS/S",
        "US/POD",
        "P50 US",
        "P99 US",
        "RSS MiB",
        "ATTEMPTS/POD",
        "PODS/GROUP"
    );
    for r in results {
        let _ = writeln!(
            out,
            "{:<w$} {:>6} {:>6} {:>4}/{:<4} {:>10.0} {:>9.1} {:>9.1} {:>9.1} {:>8.1} {:>9} {:>10}",
            r.workload,
            r.nodes,
            r.init_pods,
            r.scheduled,
            r.measured_pods,
            r.pods_per_second,
            r.micros_per_pod,
            r.p50_attempt_micros,
            r.p99_attempt_micros,
            r.peak_rss_mib,
            r.attempts_per_pod
                .map_or_else(|| "-".to_string(), |a| format!("{a:.2}")),
            r.pods_per_group
                .map_or_else(|| "-".to_string(), |n| n.to_string())
        );
        if let Some(st) = &r.startup {
            let opt = |v: Option<f64>, unit: &str| {
                v.map_or_else(|| "-".to_string(), |v| format!("{v:.0} {unit}"))
            };
            let _ = writeln!(
                out,
                "{:<w$}   start-up from lists {:.0} ms ({} bound pods: nodes {:.0} ms, pods {:.0} ms, first snapshot {:.1} ms); memory per node {}, per bound pod {}, snapshot {}, after start-up {}; snapshot update {:.1} us per attempt",
                "",
                st.startup_ms,
                st.bound_pods,
                st.load_nodes_ms,
                st.load_pods_ms,
                st.first_snapshot_ms,
                opt(st.bytes_per_node, "B"),
                opt(st.bytes_per_pod, "B"),
                opt(st.snapshot_mib.map(|m| m * 1024.0), "KiB"),
                opt(st.startup_rss_mib, "MiB"),
                st.snapshot_update_micros,
            );
        }
        if let Some(h) = &r.heartbeats {
            let _ = writeln!(
                out,
                "{:<w$}   heartbeats: {} applied ({} per attempt), {} reached the cache, {:.2} us each",
                "", h.applied, h.per_pod, h.reached_cache, h.micros_per_heartbeat,
            );
        }
    }
    out
}

/// `--kubeconfig`: every workload at every node count against the API server, one after
/// the other, each with its own scheduler process.
fn cluster(args: &BenchArgs, names: &[String], kubeconfig: &Path) -> ExitCode {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .try_init();
    let scheduler_exe = match args
        .ferrosched
        .clone()
        .map_or_else(std::env::current_exe, Ok)
    {
        Ok(e) => e,
        Err(e) => {
            eprintln!("cannot find own executable to run the scheduler: {e}");
            return ExitCode::FAILURE;
        }
    };
    if !scheduler_exe.is_file() {
        eprintln!(
            "error: --ferrosched {}: no such file; give the path of a ferrosched binary",
            scheduler_exe.display()
        );
        return ExitCode::FAILURE;
    }
    let mut schedulers = vec![SchedulerUnderTest::Ferrosched(scheduler_exe)];
    if let Some(kube) = &args.kube_scheduler {
        if !kube.is_file() {
            eprintln!(
                "error: --kube-scheduler {}: no such file; give the path of an upstream kube-scheduler binary",
                kube.display()
            );
            return ExitCode::FAILURE;
        }
        schedulers.push(SchedulerUnderTest::KubeScheduler(kube.clone()));
    }
    if args.binding_ceiling {
        schedulers.push(SchedulerUnderTest::BindingCeiling);
    }
    let rt = match super::runtime(super::Threads::Two) {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    let mut results: Vec<ClusterBenchResult> = Vec::new();
    let mut ok = true;
    rt.block_on(async {
        let client = match controller::client(Some(kubeconfig)).await {
            Ok(c) => c,
            Err(e) => {
                eprintln!("error: {e}");
                ok = false;
                return;
            }
        };
        // A group workload on a server without PodGroups: refused before any run starts.
        if let Some(name) = names.iter().find(|n| GROUP_WORKLOADS.contains(&n.as_str()))
            && let Err(e) = cluster_bench::pod_group_version(&client, name).await
        {
            eprintln!("error: {e}");
            ok = false;
            return;
        }
        for name in names {
            for &nodes in &args.nodes {
                for scheduler in &schedulers {
                    let opts = BenchOptions {
                        client: client.clone(),
                        kubeconfig: kubeconfig.to_path_buf(),
                        scheduler: scheduler.clone(),
                        stall_timeout: Duration::from_secs(args.stall_timeout),
                        keep: args.keep,
                        concurrency: args.concurrency,
                        pods_first: args.pods_first,
                        pods_per_group: args.pods_per_group.map(|n| n as usize),
                        heartbeats: args.heartbeats,
                    };
                    let who = scheduler.name();
                    eprintln!(
                        "running {name} on {nodes} nodes against the API server with {who} ..."
                    );
                    match cluster_bench::run_workload(
                        &opts,
                        name,
                        nodes,
                        args.init_pods,
                        args.measured_pods,
                    )
                    .await
                    {
                        Ok(r) => {
                            if let Some(note) = &r.note {
                                ok = false;
                                eprintln!("{name}/{nodes}: {note}");
                                if let Some(tail) = &r.scheduler_stderr_tail {
                                    eprintln!("scheduler stderr (end):\n{tail}");
                                }
                            }
                            results.push(r);
                        }
                        Err(BenchError::Interrupted) => {
                            eprintln!("interrupted; cleaned up");
                            ok = false;
                            return;
                        }
                        Err(e) => {
                            eprintln!("{name}/{nodes} ({who}): {e}");
                            ok = false;
                        }
                    }
                }
            }
        }
    });
    // Nothing ran (refused, or the server unreachable): no empty report.
    if ok || !results.is_empty() {
        match args.format().serialize(&results) {
            Some(text) => print!("{text}"),
            None => print!("{}", cluster_table(&results)),
        }
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn cluster_table(results: &[ClusterBenchResult]) -> String {
    let mut out = String::new();
    let w = results
        .iter()
        .map(|r| r.workload.len())
        .fold(18, usize::max);
    let _ = writeln!(
        out,
        "{:<14} {:<w$} {:>6} {:>6} {:>11} {:>8} {:>8} {:>8} {:>8} {:>8} {:>7} {:>7} {:>8} {:>10} {:>17}",
        "SCHEDULER",
        "WORKLOAD",
        "NODES",
        "INIT",
        "SCHEDULED",
        "PODS/S",
        "AVG/S",
        "P50/S",
        "P90/S",
        "P99/S",
        "CPU S",
        "MS/POD",
        "RSS MiB",
        "PODS/GROUP",
        "GROUP P50/P99 MS"
    );
    for (i, r) in results.iter().enumerate() {
        let group_latency = r.group_latency.as_ref().map_or_else(
            || "-".to_string(),
            |l| format!("{:.0}/{:.0}", l.p50_ms, l.p99_ms),
        );
        let _ = writeln!(
            out,
            "{:<14} {:<w$} {:>6} {:>6} {:>5}/{:<5} {:>8.0} {:>8.0} {:>8.0} {:>8.0} {:>8.0} {:>7.2} {:>7.2} {:>8.1} {:>10} {:>17}",
            r.scheduler,
            r.workload,
            r.nodes,
            r.init_pods,
            r.scheduled,
            r.measured_pods,
            r.pods_per_second,
            r.throughput.average,
            r.throughput.perc50,
            r.throughput.perc90,
            r.throughput.perc99,
            r.cpu_seconds,
            r.cpu_ms_per_pod,
            r.peak_rss_mib,
            r.pods_per_group
                .map_or_else(|| "-".to_string(), |n| n.to_string()),
            group_latency
        );
        if let Some(h) = &r.heartbeats {
            let _ = writeln!(
                out,
                "{:<14} heartbeats: {:.0}/s achieved of {:.0}/s asked ({} sent, {} failed, {:.1}s)",
                "", h.achieved_per_second, h.requested_per_second, h.sent, h.failed, h.seconds
            );
        }
        // A kube-scheduler row right after ferrosched's on the same workload: the ratios.
        let prev = i.checked_sub(1).map(|j| &results[j]);
        if let Some(f) = prev.filter(|f| {
            f.scheduler == "ferrosched"
                && r.scheduler == "kube-scheduler"
                && (f.workload.as_str(), f.nodes) == (r.workload.as_str(), r.nodes)
        }) {
            let _ = writeln!(out, "{:<14} {}", "", ratios(f, r));
        }
        // After a ceiling row: how close each scheduler of the same workload came to it.
        if r.scheduler == "binding-ceiling" && r.pods_per_second > 0.0 {
            let shares: Vec<String> = results
                .iter()
                .filter(|s| {
                    s.scheduler != r.scheduler
                        && (s.workload.as_str(), s.nodes) == (r.workload.as_str(), r.nodes)
                })
                .map(|s| {
                    format!(
                        "{} {:.0}%",
                        s.scheduler,
                        100.0 * s.pods_per_second / r.pods_per_second
                    )
                })
                .collect();
            if !shares.is_empty() {
                let _ = writeln!(out, "{:<14} of the ceiling: {}", "", shares.join(", "));
            }
        }
    }
    out
}

/// ferrosched against kube-scheduler on one workload: pods/s as a multiple, CPU per pod
/// and peak memory as fractions of kube-scheduler's.
fn ratios(ferrosched: &ClusterBenchResult, kube: &ClusterBenchResult) -> String {
    let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { f64::NAN };
    format!(
        "ferrosched/kube-scheduler: pods/s {:.2}x, CPU per pod {:.3}x, peak RSS {:.3}x",
        ratio(ferrosched.pods_per_second, kube.pods_per_second),
        ratio(ferrosched.cpu_ms_per_pod, kube.cpu_ms_per_pod),
        ratio(ferrosched.peak_rss_mib, kube.peak_rss_mib),
    )
}
