//! `ferrosched bench --kubeconfig`: scheduler_perf's method against a real API server.
//!
//! One run per workload: a namespace, labelled fake Nodes (kwok-like: capacity, a Ready
//! condition, no kubelet) tainted so no other scheduler uses them, then init pods and
//! measured pods whose `schedulerName` and nodeSelector name only this run (for the group
//! workloads, each phase's PodGroups before its pods, in the Workload API version the
//! server serves; a server serving none is refused before anything is created). The scheduler
//! runs as a child process (`ferrosched run`, or upstream's kube-scheduler for a
//! side-by-side run against the same server), so its CPU time and peak RSS are its own.
//! A pod watch records when each pod is first seen bound; throughput is taken from the
//! first to the last measured binding and, like scheduler_perf's throughput collector, as
//! per-second samples with their average and percentiles. Everything created carries the
//! run label and is deleted by it at the end, also after a failure or Ctrl-C.
//!
//! This module drives a run; `objects` builds what it creates, `measure` watches and
//! measures, `scheduler` handles the child process. It never runs the controller in this
//! process (the measurement would include the driver) and uses controller only through its
//! public API.

mod heartbeats;
mod measure;
mod objects;
mod scheduler;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use std::collections::BTreeSet;

use controller::client::status_code;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DynamicObject, ListParams, PostParams};
use kube::{Api, Client};
use scheduler_core::bench_workloads::{self, Workload};
use serde::{Deserialize, Serialize};

pub use heartbeats::{HeartbeatReport, MAX_IN_FLIGHT as HEARTBEATS_IN_FLIGHT, heartbeat_patch};
use measure::{Tracker, track};
pub use measure::{group_latency, process_cpu_seconds, process_peak_rss_mib, throughput};
pub use objects::{
    POD_GROUP_API_GROUP, POD_GROUP_VERSIONS, RunNames, bench_node, bench_pod, bench_pod_group,
    cleanup, pod_group_resource, priority_classes, scheduler_config,
};
use objects::{create_all, create_default_service_account, restore_node_status};
use scheduler::Scheduler;

/// Label on every object a run creates; its value is the run id.
pub const RUN_LABEL: &str = "ferrosched.io/bench-run";
/// Label telling init pods from measured ones.
pub const PHASE_LABEL: &str = "ferrosched.io/bench-phase";
/// Taint on the fake nodes (value: the run id); only this run's pods tolerate it.
pub const TAINT_KEY: &str = "ferrosched.io/bench";

/// How a run is driven.
pub struct BenchOptions {
    pub client: Client,
    /// Handed to the scheduler child.
    pub kubeconfig: PathBuf,
    /// The scheduler under test.
    pub scheduler: SchedulerUnderTest,
    /// Give up (with partial results) when no pod was bound for this long.
    pub stall_timeout: Duration,
    /// Leave everything in the cluster.
    pub keep: bool,
    /// Concurrent create requests.
    pub concurrency: usize,
    /// Create the measured pods while no scheduler runs: the scheduler binds the init
    /// pods, stops, the measured pods are created, and a fresh scheduler process then
    /// schedules them all, so the driver's create rate no longer bounds pods/s. CPU and
    /// peak RSS are then those of that second process over its whole life (its start-up
    /// lists included).
    pub pods_first: bool,
    /// Pods per PodGroup for the group workloads (None: the workload's default).
    pub pods_per_group: Option<usize>,
    /// Heartbeats per second during the measured phase (`--heartbeats`): node status
    /// PATCHes round robin over the run's nodes, from a client of their own.
    pub heartbeats: Option<f64>,
}

#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("unknown workload {0:?}")]
    UnknownWorkload(String),
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("{0}")]
    Io(String),
    #[error("the scheduler exited early ({status}); its stderr ends with:\n{tail}")]
    SchedulerDied { status: String, tail: String },
    #[error("interrupted")]
    Interrupted,
    /// A group workload against a server without the Workload API's PodGroups.
    #[error(
        "{workload} needs PodGroups ({POD_GROUP_API_GROUP}/{} or {} podgroups), which the API server ({server}) does not serve; turn them on (kube-apiserver --runtime-config={POD_GROUP_API_GROUP}/{}=true --feature-gates=GenericWorkload=true) or run {workload} in memory (without --kubeconfig)",
        POD_GROUP_VERSIONS[0], POD_GROUP_VERSIONS[1], POD_GROUP_VERSIONS[0]
    )]
    PodGroupsNotServed { workload: String, server: String },
}

/// The Workload API version serving PodGroups (newest first, as the scheduler chooses), for
/// a run of `workload`; [`BenchError::PodGroupsNotServed`], naming the server's version,
/// when there is none. A version the server does not have answers 404; other failures are
/// errors.
pub async fn pod_group_version(
    client: &Client,
    workload: &str,
) -> Result<&'static str, BenchError> {
    for v in POD_GROUP_VERSIONS {
        match client
            .list_api_group_resources(&format!("{POD_GROUP_API_GROUP}/{v}"))
            .await
        {
            Ok(list) if list.resources.iter().any(|r| r.name == "podgroups") => return Ok(v),
            Ok(_) => {}
            Err(e) if status_code(&e) == Some(404) => {}
            Err(e) => return Err(e.into()),
        }
    }
    let server = match client.apiserver_version().await {
        Ok(v) => v.git_version,
        Err(e) => format!("version unknown: {e}"),
    };
    Err(BenchError::PodGroupsNotServed {
        workload: workload.to_string(),
        server,
    })
}

/// Which scheduler a run starts as its child. Both read the same
/// KubeSchedulerConfiguration (the run's profiles, `clientConnection.kubeconfig`), so one
/// config file serves either.
#[derive(Clone, Debug)]
pub enum SchedulerUnderTest {
    /// This `ferrosched` binary: `ferrosched run --config FILE --secure-port 0`.
    Ferrosched(PathBuf),
    /// An upstream kube-scheduler binary: `kube-scheduler --config FILE --secure-port 0`.
    KubeScheduler(PathBuf),
    /// No scheduler: the driver itself POSTs a Binding for every pod (round robin over the
    /// run's nodes) through the controller's own client and Binding call, qps/burst 5000,
    /// [`controller::MAX_ACTIONS_IN_FLIGHT`] at once. The measured pods all exist before
    /// the first Binding. What the API server sustains: the ceiling of any scheduler.
    BindingCeiling,
}

impl SchedulerUnderTest {
    /// The name reports use.
    pub fn name(&self) -> &'static str {
        match self {
            SchedulerUnderTest::Ferrosched(_) => "ferrosched",
            SchedulerUnderTest::KubeScheduler(_) => "kube-scheduler",
            SchedulerUnderTest::BindingCeiling => "binding-ceiling",
        }
    }

    /// The child's binary; None for the binding ceiling (no child).
    pub fn exe(&self) -> Option<&Path> {
        match self {
            SchedulerUnderTest::Ferrosched(p) | SchedulerUnderTest::KubeScheduler(p) => Some(p),
            SchedulerUnderTest::BindingCeiling => None,
        }
    }

    /// The child's command line for a run whose config is `config`; None for the binding
    /// ceiling.
    pub fn command(&self, config: &Path) -> Option<Command> {
        let mut cmd = Command::new(self.exe()?);
        if let SchedulerUnderTest::Ferrosched(_) = self {
            cmd.arg("run");
        }
        // No serving port: runs never collide on it, and neither scheduler spends CPU on it.
        cmd.arg("--config").arg(config).args(["--secure-port", "0"]);
        Some(cmd)
    }
}

/// scheduler_perf's SchedulingThroughput: per-second samples of newly bound pods.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Throughput {
    pub samples: usize,
    pub average: f64,
    pub perc50: f64,
    pub perc90: f64,
    pub perc99: f64,
}

/// Per group: from the watch's first sight of the group's last pod to the first sight of
/// its last pod bound; over the groups whose pods were all bound. Percentiles as the
/// throughput's (`sorted[ceil(n*p/100)-1]`).
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct GroupLatency {
    /// Groups whose pods were all bound.
    pub groups: usize,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

/// What one workload run measured.
#[derive(Serialize, Deserialize, Debug, Clone)]
#[serde(rename_all = "camelCase")]
pub struct ClusterBenchResult {
    /// `ferrosched` or `kube-scheduler`.
    #[serde(default)]
    pub scheduler: String,
    pub workload: String,
    pub run_id: String,
    pub namespace: String,
    pub nodes: usize,
    pub init_pods: usize,
    pub init_scheduled: usize,
    pub measured_pods: usize,
    pub scheduled: usize,
    /// Measured pods bound divided by the time from the first to the last measured binding.
    pub pods_per_second: f64,
    pub first_to_last_seconds: f64,
    pub throughput: Throughput,
    /// How fast the driver created the measured pods (a ceiling on pods/s unless the
    /// pods were created first).
    pub create_pods_per_second: f64,
    /// The measured pods existed before the scheduler that bound them started.
    #[serde(default)]
    pub pods_first: bool,
    /// From the start of the process that bound the measured pods (pods first) or from
    /// the first measured create to the first measured binding: start-up and sync time
    /// that pods/s (first to last binding) leaves out.
    #[serde(default)]
    pub start_to_first_binding_seconds: f64,
    /// The scheduler's user+system CPU over its whole life (sync, init and measured pods).
    pub cpu_seconds: f64,
    /// The scheduler's CPU while the measured pods were created and scheduled (pods
    /// first: the whole life of the process that scheduled them). 0 for the ceiling.
    pub measured_cpu_seconds: f64,
    pub cpu_ms_per_pod: f64,
    /// The scheduler's VmHWM.
    pub peak_rss_mib: f64,
    /// Every measured pod was bound.
    pub complete: bool,
    /// Group workloads: pods per PodGroup.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pods_per_group: Option<usize>,
    /// Group workloads: per measured group, from its last pod's creation to its last pod's
    /// binding (both as the pod watch first saw them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_latency: Option<GroupLatency>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The end of the scheduler's stderr, when the run did not complete.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduler_stderr_tail: Option<String>,
    /// The heartbeat storm during the measured phase (`--heartbeats`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heartbeats: Option<HeartbeatReport>,
}

/// Runs one workload against the cluster and cleans up after it (unless `keep`), also when
/// it fails or Ctrl-C arrives.
pub async fn run_workload(
    opts: &BenchOptions,
    name: &str,
    nodes: usize,
    init: usize,
    measured: usize,
) -> Result<ClusterBenchResult, BenchError> {
    let w = bench_workloads::build(name, nodes, init, measured)
        .or_else(|| bench_workloads::build_group(name, nodes, init, measured, opts.pods_per_group))
        .ok_or_else(|| BenchError::UnknownWorkload(name.to_string()))?;
    // Before anything is created: a group workload needs the server's PodGroups.
    let pod_groups = if w.pod_groups.is_empty() {
        None
    } else {
        Some(pod_group_version(&opts.client, name).await?)
    };
    let run = RunNames::fresh();
    let dir = std::env::temp_dir().join(format!("ferrosched-bench-{}", run.id));
    std::fs::create_dir_all(&dir).map_err(|e| BenchError::Io(format!("{}: {e}", dir.display())))?;
    let scheduler = Arc::new(Mutex::new(Scheduler {
        child: None,
        stderr: dir.join("scheduler.log"),
    }));
    let tracker = Arc::new(Mutex::new(Tracker::default()));
    let result = tokio::select! {
        r = drive(opts, &w, &run, pod_groups, &dir, &scheduler, &tracker) => r,
        _ = tokio::signal::ctrl_c() => Err(BenchError::Interrupted),
    };
    scheduler.lock().unwrap().stop();
    if opts.keep {
        eprintln!(
            "kept run {} (namespace {}; delete with label {})",
            run.id,
            run.namespace,
            run.selector()
        );
    } else {
        for e in cleanup(&opts.client, &run, pod_groups).await {
            eprintln!("cleanup of run {}: {e}", run.id);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    result
}

#[allow(clippy::too_many_arguments)]
async fn drive(
    opts: &BenchOptions,
    w: &Workload,
    run: &RunNames,
    pod_group_version: Option<&str>,
    dir: &Path,
    scheduler: &Mutex<Scheduler>,
    tracker: &Arc<Mutex<Tracker>>,
) -> Result<ClusterBenchResult, BenchError> {
    let client = &opts.client;
    let io = |e: std::io::Error| BenchError::Io(e.to_string());
    let config = dir.join("scheduler.yaml");
    std::fs::write(
        &config,
        scheduler_config(run, &w.name, Some(&opts.kubeconfig)),
    )
    .map_err(io)?;

    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(run.namespace.clone()),
            labels: Some(run.labels(&[])),
            ..Default::default()
        },
        ..Default::default()
    };
    namespaces.create(&PostParams::default(), &ns).await?;
    create_default_service_account(client, run).await?;
    let all_pods: Vec<Pod> = w
        .init_pods
        .iter()
        .chain(&w.measured_pods)
        .cloned()
        .collect();
    create_all(
        &Api::<PriorityClass>::all(client.clone()),
        priority_classes(run, &all_pods),
        opts.concurrency,
    )
    .await?;
    let nodes: Vec<Node> = w
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| bench_node(run, i, n))
        .collect();
    let t = Instant::now();
    let node_api: Api<Node> = Api::all(client.clone());
    create_all(&node_api, nodes.clone(), opts.concurrency).await?;
    restore_node_status(&node_api, run, nodes, opts.concurrency).await?;
    eprintln!(
        "{}: created {} nodes in {:.1}s",
        w.name,
        w.nodes.len(),
        t.elapsed().as_secs_f64()
    );

    let pods: Api<Pod> = Api::namespaced(client.clone(), &run.namespace);
    // Each phase's PodGroups are created right before its pods.
    let groups = PhaseGroups::new(client, w, run, pod_group_version);
    let watch = tokio::spawn(track(pods.clone(), run.selector(), Arc::clone(tracker)));
    let _abort_watch = AbortOnDrop(watch);
    let ceiling = (opts.scheduler.exe().is_none()).then(|| Ceiling {
        binder: controller::Binder::new(client.clone(), 5000.0, 5000),
        nodes: (0..w.nodes.len()).map(|i| run.node_name(i)).collect(),
    });

    // The scheduler starts after the nodes exist, so it lists them instead of taking
    // thousands of watch events.
    let mut pid = match ceiling {
        None => Some(start_scheduler(opts, &config, &w.name, scheduler)?),
        Some(_) => None,
    };

    let t = Instant::now();
    while !tracker.lock().unwrap().synced {
        if t.elapsed() > opts.stall_timeout {
            return Err(BenchError::Io(format!(
                "the watch on pods in {} did not start within {}s",
                run.namespace,
                opts.stall_timeout.as_secs()
            )));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let init: Vec<Pod> = w
        .init_pods
        .iter()
        .map(|p| bench_pod(run, "init", p))
        .collect();
    let t = Instant::now();
    groups.create("init", opts.concurrency).await?;
    create_all(&pods, init, opts.concurrency).await?;
    if let Some(c) = &ceiling {
        c.bind_phase(&pods, run, "init").await?;
    }
    let init_done = wait_bound(opts, scheduler, tracker, |t| {
        t.init_bound >= w.init_pods.len()
    })
    .await?;
    eprintln!(
        "{}: {} init pods bound in {:.1}s",
        w.name,
        tracker.lock().unwrap().init_bound,
        t.elapsed().as_secs_f64()
    );

    let mut cpu_before = pid.and_then(process_cpu_seconds).unwrap_or(0.0);
    let mut stalled_in = (!init_done).then_some("init");
    let mut create_rate = 0.0;
    let pods_first = opts.pods_first || ceiling.is_some();
    let mut measured_start = Instant::now();
    let mut first_rss = 0.0;
    let mut storm = None;
    if init_done {
        if pods_first && let Some(p) = pid.take() {
            first_rss = process_peak_rss_mib(p).unwrap_or(0.0);
            scheduler.lock().unwrap().stop();
        }
        let measured: Vec<Pod> = w
            .measured_pods
            .iter()
            .map(|p| bench_pod(run, "measured", p))
            .collect();
        // The storm blows from before the measured pods exist until they are all bound.
        if let Some(rate) = opts.heartbeats {
            let own = controller::client(Some(&opts.kubeconfig))
                .await
                .map_err(|e| BenchError::Io(format!("heartbeat client: {e}")))?;
            let names = (0..w.nodes.len()).map(|i| run.node_name(i)).collect();
            storm = Some(heartbeats::Storm::start(own, names, rate));
        }
        groups.create("measured", opts.concurrency).await?;
        let t = Instant::now();
        create_all(&pods, measured, opts.concurrency).await?;
        create_rate = w.measured_pods.len() as f64 / t.elapsed().as_secs_f64().max(1e-9);
        if !pods_first {
            measured_start = t;
        } else if let Some(c) = &ceiling {
            measured_start = Instant::now();
            c.bind_phase(&pods, run, "measured").await?;
        } else {
            measured_start = Instant::now();
            pid = Some(start_scheduler(opts, &config, &w.name, scheduler)?);
            cpu_before = 0.0;
        }
        let n = w.measured_pods.len();
        if !wait_bound(opts, scheduler, tracker, |t| t.measured_bound.len() >= n).await? {
            stalled_in = Some("measured");
        }
    }
    let heartbeats = match storm {
        Some(s) => Some(s.stop().await),
        None => None,
    };
    let cpu_after = pid.and_then(process_cpu_seconds).unwrap_or(0.0);
    let peak_rss_mib = pid
        .and_then(process_peak_rss_mib)
        .unwrap_or(0.0)
        .max(first_rss);

    let t = tracker.lock().unwrap();
    let mut times = t.measured_bound.clone();
    times.sort_unstable();
    let origin = times.first().copied();
    let start_to_first = origin.map_or(0.0, |o| {
        o.saturating_duration_since(measured_start).as_secs_f64()
    });
    let since: Vec<Duration> = times
        .iter()
        .map(|i| i.duration_since(origin.unwrap_or(*i)))
        .collect();
    let span = since.last().map_or(0.0, Duration::as_secs_f64);
    let scheduled = times.len();
    let measured_cpu = cpu_after - cpu_before;
    let complete = stalled_in.is_none();
    let group_latency = (!w.pod_groups.is_empty()).then(|| group_latency(&t.measured_groups()));
    Ok(ClusterBenchResult {
        scheduler: opts.scheduler.name().to_string(),
        workload: w.name.clone(),
        run_id: run.id.clone(),
        namespace: run.namespace.clone(),
        nodes: w.nodes.len(),
        init_pods: w.init_pods.len(),
        init_scheduled: t.init_bound,
        measured_pods: w.measured_pods.len(),
        scheduled,
        pods_per_second: if scheduled == 0 {
            0.0
        } else {
            scheduled as f64 / span.max(1e-3)
        },
        first_to_last_seconds: span,
        throughput: throughput(&since),
        create_pods_per_second: create_rate,
        pods_first,
        start_to_first_binding_seconds: start_to_first,
        cpu_seconds: cpu_after,
        measured_cpu_seconds: measured_cpu,
        cpu_ms_per_pod: measured_cpu * 1000.0 / scheduled.max(1) as f64,
        peak_rss_mib,
        complete,
        pods_per_group: w.pods_per_group,
        group_latency,
        note: stalled_in.map(|phase| {
            format!(
                "no {phase} pod was bound for {}s; partial results",
                opts.stall_timeout.as_secs()
            )
        }),
        scheduler_stderr_tail: (!complete).then(|| scheduler.lock().unwrap().stderr_tail()),
        heartbeats,
    })
}

/// Starts the scheduler child (stderr to the run's log); returns its pid.
fn start_scheduler(
    opts: &BenchOptions,
    config: &Path,
    workload: &str,
    scheduler: &Mutex<Scheduler>,
) -> Result<u32, BenchError> {
    let mut s = scheduler.lock().unwrap();
    let stderr = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&s.stderr)
        .map_err(|e| BenchError::Io(format!("{}: {e}", s.stderr.display())))?;
    let (Some(mut cmd), Some(exe)) = (opts.scheduler.command(config), opts.scheduler.exe()) else {
        return Err(BenchError::Io("no scheduler to start".into()));
    };
    let kube = matches!(opts.scheduler, SchedulerUnderTest::KubeScheduler(_));
    let child = cmd
        .args(objects::scheduler_flags(workload, kube))
        // Plain text in the log we show on a stall.
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .map_err(|e| BenchError::Io(format!("{}: {e}", exe.display())))?;
    let pid = child.id();
    s.child = Some(child);
    Ok(pid)
}

/// A group workload's PodGroups by phase, as this run's objects (none for other workloads).
struct PhaseGroups {
    api: Option<Api<DynamicObject>>,
    init: Vec<DynamicObject>,
    measured: Vec<DynamicObject>,
}

impl PhaseGroups {
    fn new(client: &Client, w: &Workload, run: &RunNames, version: Option<&str>) -> Self {
        let Some(version) = version else {
            return PhaseGroups {
                api: None,
                init: Vec::new(),
                measured: Vec::new(),
            };
        };
        // A group is the init phase's when an init pod names it.
        let of_init: BTreeSet<&str> = w
            .init_pods
            .iter()
            .filter_map(|p| {
                p.spec
                    .as_ref()?
                    .scheduling_group
                    .as_ref()?
                    .pod_group_name
                    .as_deref()
            })
            .collect();
        let (init, measured) = w
            .pod_groups
            .iter()
            .partition::<Vec<_>, _>(|g| of_init.contains(g.key.name.as_str()));
        let objects = |gs: Vec<_>| {
            gs.into_iter()
                .map(|g| bench_pod_group(run, g, version))
                .collect()
        };
        PhaseGroups {
            api: Some(Api::namespaced_with(
                client.clone(),
                &run.namespace,
                &pod_group_resource(version),
            )),
            init: objects(init),
            measured: objects(measured),
        }
    }

    /// Creates the PodGroups of `phase` (`init` or `measured`).
    async fn create(&self, phase: &str, concurrency: usize) -> Result<(), BenchError> {
        let Some(api) = &self.api else {
            return Ok(());
        };
        let groups = if phase == "init" {
            &self.init
        } else {
            &self.measured
        };
        create_all(api, groups.clone(), concurrency).await?;
        Ok(())
    }
}

/// The binding ceiling's "scheduler": the controller's Binding call, no scheduling.
struct Ceiling {
    binder: controller::Binder,
    nodes: Vec<String>,
}

impl Ceiling {
    /// Binds every pod of `phase` (listed for their UIDs, as a scheduler's informer has
    /// them), round robin over the nodes, [`controller::MAX_ACTIONS_IN_FLIGHT`] at once.
    async fn bind_phase(
        &self,
        pods: &Api<Pod>,
        run: &RunNames,
        phase: &str,
    ) -> Result<(), BenchError> {
        let lp = ListParams::default().labels(&format!("{},{PHASE_LABEL}={phase}", run.selector()));
        let refs: Vec<controller::PodRef> = pods
            .list(&lp)
            .await?
            .items
            .into_iter()
            .map(|p| controller::PodRef {
                namespace: run.namespace.clone(),
                name: p.metadata.name.unwrap_or_default(),
                uid: p.metadata.uid.unwrap_or_default(),
            })
            .collect();
        futures::stream::iter(refs.iter().enumerate())
            .map(|(i, pod)| {
                self.binder
                    .bind(pod, &self.nodes[i % self.nodes.len().max(1)])
            })
            .buffer_unordered(controller::MAX_ACTIONS_IN_FLIGHT)
            .try_collect::<Vec<()>>()
            .await?;
        Ok(())
    }
}

/// Waits until `done`; false when no pod was bound for the stall timeout. Fails when the
/// scheduler exits.
async fn wait_bound(
    opts: &BenchOptions,
    scheduler: &Mutex<Scheduler>,
    tracker: &Mutex<Tracker>,
    done: impl Fn(&Tracker) -> bool,
) -> Result<bool, BenchError> {
    let start = Instant::now();
    loop {
        {
            let t = tracker.lock().unwrap();
            if done(&t) {
                return Ok(true);
            }
            let progress = t.last_binding.map_or(start, |l| l.max(start));
            if progress.elapsed() > opts.stall_timeout {
                return Ok(false);
            }
        }
        {
            let mut s = scheduler.lock().unwrap();
            if let Some(status) = s.exited() {
                return Err(BenchError::SchedulerDied {
                    status,
                    tail: s.stderr_tail(),
                });
            }
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(cmd: &Command) -> Vec<String> {
        cmd.get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn both_schedulers_read_the_same_config_and_serve_nothing() {
        let config = Path::new("/tmp/run/scheduler.yaml");
        let ferro = SchedulerUnderTest::Ferrosched("/bin/ferrosched".into());
        let kube = SchedulerUnderTest::KubeScheduler("/opt/kube-scheduler".into());
        assert_eq!(
            args(&ferro.command(config).unwrap()),
            [
                "run",
                "--config",
                "/tmp/run/scheduler.yaml",
                "--secure-port",
                "0"
            ]
        );
        // kube-scheduler has no subcommand; it takes the kubeconfig from the config file.
        assert_eq!(
            args(&kube.command(config).unwrap()),
            ["--config", "/tmp/run/scheduler.yaml", "--secure-port", "0"]
        );
        assert_eq!(
            kube.command(config).unwrap().get_program(),
            "/opt/kube-scheduler"
        );
        // The binding ceiling starts no process.
        let ceiling = SchedulerUnderTest::BindingCeiling;
        assert!(ceiling.command(config).is_none() && ceiling.exe().is_none());
        assert_eq!(ceiling.name(), "binding-ceiling");
        assert_eq!(
            (ferro.name(), kube.name()),
            ("ferrosched", "kube-scheduler")
        );
    }
}
