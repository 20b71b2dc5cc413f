//! `ferrosched bench --kubeconfig`: scheduler_perf's method against a real API server.
//!
//! One run per workload: a namespace, labelled fake Nodes (kwok-like: capacity, a Ready
//! condition, no kubelet) tainted so no other scheduler uses them, then init pods and
//! measured pods whose `schedulerName` and nodeSelector name only this run. The scheduler
//! runs as a child process (`ferrosched run`), so its CPU time and peak RSS are its own.
//! A pod watch records when each pod is first seen bound; throughput is taken from the
//! first to the last measured binding and, like scheduler_perf's throughput collector, as
//! per-second samples with their average and percentiles. Everything created carries the
//! run label and is deleted by it at the end, also after a failure or Ctrl-C.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Namespace, Node, NodeCondition, Pod, Taint, Toleration};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource};
use scheduler_core::workloads::{self, Workload};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::retry::status_code;

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
    /// The `ferrosched` binary to run as the scheduler.
    pub scheduler_exe: PathBuf,
    /// Give up (with partial results) when no pod was bound for this long.
    pub stall_timeout: Duration,
    /// Leave everything in the cluster.
    pub keep: bool,
    /// Concurrent create requests.
    pub concurrency: usize,
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

/// What one workload run measured.
#[derive(Serialize, Deserialize, Debug, Clone)]
#[serde(rename_all = "camelCase")]
pub struct ClusterBenchResult {
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
    /// How fast the driver created the measured pods (a ceiling on pods/s).
    pub create_pods_per_second: f64,
    /// The scheduler's user+system CPU over its whole life (sync, init and measured pods).
    pub cpu_seconds: f64,
    /// The scheduler's CPU while the measured pods were created and scheduled.
    pub measured_cpu_seconds: f64,
    pub cpu_ms_per_pod: f64,
    /// The scheduler's VmHWM.
    pub peak_rss_mib: f64,
    /// Every measured pod was bound.
    pub complete: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The end of the scheduler's stderr, when the run did not complete.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduler_stderr_tail: Option<String>,
}

/// Names of one run.
#[derive(Clone, Debug)]
pub struct RunNames {
    pub id: String,
    pub namespace: String,
    pub scheduler_name: String,
}

impl RunNames {
    pub fn new(id: &str) -> Self {
        RunNames {
            id: id.to_string(),
            namespace: format!("ferrosched-bench-{id}"),
            scheduler_name: format!("ferrosched-bench-{id}"),
        }
    }

    /// A short id, unique enough between runs against one cluster.
    pub fn fresh() -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let mix = (nanos as u64) ^ (u64::from(std::process::id()) << 40);
        Self::new(&format!("{:08x}", mix & 0xffff_ffff))
    }

    pub fn selector(&self) -> String {
        format!("{RUN_LABEL}={}", self.id)
    }

    fn labels(&self, extra: &[(&str, &str)]) -> BTreeMap<String, String> {
        let mut l: BTreeMap<String, String> = extra
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        l.insert(RUN_LABEL.into(), self.id.clone());
        l
    }

    fn node_name(&self, i: usize) -> String {
        format!("ferrosched-bench-{}-node-{i}", self.id)
    }

    fn priority_class(&self, priority: i32) -> String {
        format!("{}-p{}", self.scheduler_name, priority.unsigned_abs())
    }
}

/// The scheduler's config: leader election off, client qps/burst 5000 as scheduler_perf,
/// the run's profile name(s).
pub fn scheduler_config(run: &RunNames, workload: &str) -> String {
    let mut text = format!(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nleaderElection:\n  leaderElect: false\nclientConnection:\n  qps: 5000\n  burst: 5000\nprofiles:\n- schedulerName: {}\n",
        run.scheduler_name
    );
    if workload == "MixedProfiles" {
        // The workload's second profile (see scheduler-core's workloads).
        text.push_str(&format!(
            "- schedulerName: {}-bin-packing\n  pluginConfig:\n  - name: NodeResourcesFit\n    args:\n      scoringStrategy:\n        type: MostAllocated\n",
            run.scheduler_name
        ));
    }
    text
}

/// The workload's node as a fake node of this run: unique name, run label, the run's
/// taint and a Ready condition.
pub fn bench_node(run: &RunNames, i: usize, template: &Node) -> Node {
    let mut n = template.clone();
    let name = run.node_name(i);
    let mut labels = n.metadata.labels.take().unwrap_or_default();
    labels.insert("kubernetes.io/hostname".into(), name.clone());
    labels.insert(RUN_LABEL.into(), run.id.clone());
    n.metadata = ObjectMeta {
        name: Some(name),
        labels: Some(labels),
        ..Default::default()
    };
    let spec = n.spec.get_or_insert_with(Default::default);
    spec.taints.get_or_insert_with(Vec::new).push(Taint {
        key: TAINT_KEY.into(),
        value: Some(run.id.clone()),
        effect: "NoSchedule".into(),
        ..Default::default()
    });
    let status = n.status.get_or_insert_with(Default::default);
    status.conditions = Some(vec![NodeCondition {
        type_: "Ready".into(),
        status: "True".into(),
        reason: Some("KubeletReady".into()),
        message: Some("fake node of a ferrosched bench run".into()),
        ..Default::default()
    }]);
    n
}

/// The workload's pod as a pod of this run: its namespace, labels, scheduler name, a
/// nodeSelector on the run's nodes, tolerations for their taint (and for the not-ready and
/// unreachable taints a node controller puts on kubelet-less nodes), no grace period (no
/// kubelet will confirm a deletion) and, for a priority, the matching PriorityClass.
pub fn bench_pod(run: &RunNames, phase: &str, template: &Pod) -> Pod {
    let mut p = template.clone();
    let mut labels = p.metadata.labels.take().unwrap_or_default();
    labels.insert(RUN_LABEL.into(), run.id.clone());
    labels.insert(PHASE_LABEL.into(), phase.into());
    p.metadata = ObjectMeta {
        name: p.metadata.name.take(),
        namespace: Some(run.namespace.clone()),
        labels: Some(labels),
        ..Default::default()
    };
    let spec = p.spec.get_or_insert_with(Default::default);
    spec.scheduler_name = Some(match spec.scheduler_name.as_deref() {
        None | Some("default-scheduler") => run.scheduler_name.clone(),
        Some(other) => format!("{}-{other}", run.scheduler_name),
    });
    spec.node_selector
        .get_or_insert_with(Default::default)
        .insert(RUN_LABEL.into(), run.id.clone());
    let tolerations = spec.tolerations.get_or_insert_with(Vec::new);
    tolerations.push(Toleration {
        key: Some(TAINT_KEY.into()),
        operator: Some("Equal".into()),
        value: Some(run.id.clone()),
        effect: Some("NoSchedule".into()),
        ..Default::default()
    });
    for key in [
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
    ] {
        tolerations.push(Toleration {
            key: Some(key.into()),
            operator: Some("Exists".into()),
            ..Default::default()
        });
    }
    spec.termination_grace_period_seconds = Some(0);
    if let Some(priority) = spec.priority {
        spec.priority_class_name = Some(run.priority_class(priority));
    }
    p
}

/// One PriorityClass per distinct priority of the workload's pods (a real API server's
/// Priority admission resolves `priorityClassName` and requires an equal `priority`).
pub fn priority_classes(run: &RunNames, pods: &[Pod]) -> Vec<PriorityClass> {
    let values: BTreeSet<i32> = pods
        .iter()
        .filter_map(|p| p.spec.as_ref()?.priority)
        .collect();
    values
        .into_iter()
        .map(|value| PriorityClass {
            metadata: ObjectMeta {
                name: Some(run.priority_class(value)),
                labels: Some(run.labels(&[])),
                ..Default::default()
            },
            value,
            description: Some("ferrosched bench run".into()),
            ..Default::default()
        })
        .collect()
}

/// scheduler_perf's throughput: bindings per 1 s window from the first measured binding
/// (a last partial window counts, scaled, when it is at least half a second; a run shorter
/// than a second gives one sample), then average and percentiles the way its collector
/// picks them (`sorted[ceil(n*p/100)-1]`).
pub fn throughput(bound_at: &[Duration]) -> Throughput {
    let mut t: Vec<Duration> = bound_at.to_vec();
    t.sort_unstable();
    let (Some(first), Some(last)) = (t.first(), t.last()) else {
        return Throughput::default();
    };
    let span = (*last - *first).as_secs_f64();
    let mut samples = Vec::new();
    if span < 1.0 {
        samples.push(t.len() as f64 / span.max(1e-3));
    } else {
        let full = span.floor() as usize;
        let mut counts = vec![0usize; full + 1];
        for d in &t {
            let w = ((*d - *first).as_secs_f64().floor() as usize).min(full);
            counts[w] += 1;
        }
        for c in &counts[..full] {
            samples.push(*c as f64);
        }
        let rest = span - full as f64;
        if rest >= 0.5 {
            samples.push(counts[full] as f64 / rest);
        } else if let Some(s) = samples.last_mut() {
            // Too short to be a sample of its own: the stragglers join the last window.
            *s += counts[full] as f64;
        }
    }
    samples.sort_by(f64::total_cmp);
    let n = samples.len();
    let pick = |p: usize| samples[(n * p).div_ceil(100).max(1) - 1];
    Throughput {
        samples: n,
        average: samples.iter().sum::<f64>() / n as f64,
        perc50: pick(50),
        perc90: pick(90),
        perc99: pick(99),
    }
}

/// CPU seconds (utime + stime) of a process from /proc/<pid>/stat; None off Linux.
pub fn process_cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may contain spaces) start at field 3.
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = f.get(11)?.parse().ok()?;
    let stime: f64 = f.get(12)?.parse().ok()?;
    // USER_HZ: 100 on every Linux architecture we build for.
    Some((utime + stime) / 100.0)
}

/// Peak resident set size (VmHWM) of a process in MiB; None off Linux.
pub fn process_peak_rss_mib(pid: u32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

/// When each pod of the run was first seen bound.
#[derive(Default)]
struct Tracker {
    synced: bool,
    bound: HashMap<String, Instant>,
    init_bound: usize,
    measured_bound: Vec<Instant>,
    last_binding: Option<Instant>,
}

async fn track(api: Api<Pod>, selector: String, tracker: Arc<Mutex<Tracker>>) {
    let stream = watcher(api, watcher::Config::default().labels(&selector)).default_backoff();
    futures::pin_mut!(stream);
    while let Some(event) = stream.next().await {
        let now = Instant::now();
        let pod = match event {
            Ok(watcher::Event::Apply(p) | watcher::Event::InitApply(p)) => p,
            Ok(watcher::Event::InitDone) => {
                tracker.lock().unwrap().synced = true;
                continue;
            }
            Ok(_) => continue,
            Err(e) => {
                tracing::warn!(error = %e, "bench pod watch failed; retrying");
                continue;
            }
        };
        let bound = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .is_some_and(|n| !n.is_empty());
        let Some(name) = pod.metadata.name.clone().filter(|_| bound) else {
            continue;
        };
        let measured = pod
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(PHASE_LABEL))
            .is_some_and(|p| p == "measured");
        let mut t = tracker.lock().unwrap();
        if t.bound.insert(name, now).is_none() {
            if measured {
                t.measured_bound.push(now);
            } else {
                t.init_bound += 1;
            }
            t.last_binding = Some(now);
        }
    }
}

/// Creates every object with at most `concurrency` requests in flight. An object that
/// already exists (a retried create that had succeeded) counts as created; other errors are
/// retried a few times (a real API server may refuse pods until the namespace's default
/// ServiceAccount exists).
async fn create_all<K>(api: &Api<K>, objects: Vec<K>, concurrency: usize) -> Result<(), kube::Error>
where
    K: Resource + Clone + Serialize + DeserializeOwned + std::fmt::Debug,
{
    futures::stream::iter(objects)
        .map(|o| async move {
            let mut attempt = 0u32;
            loop {
                match api.create(&PostParams::default(), &o).await {
                    Ok(_) => return Ok(()),
                    Err(e) if status_code(&e) == Some(409) => return Ok(()),
                    Err(e) if attempt >= 5 => return Err(e),
                    Err(e) => {
                        tracing::debug!(error = %e, attempt, "create failed; retrying");
                        attempt += 1;
                        tokio::time::sleep(Duration::from_millis(200) * attempt).await;
                    }
                }
            }
        })
        .buffer_unordered(concurrency.max(1))
        .try_collect::<Vec<()>>()
        .await
        .map(|_| ())
}

/// Puts back the status of nodes the API server created without one (kubelets and kwok
/// write it through the status subresource; the nodes must have capacity before pods come).
async fn restore_node_status(
    api: &Api<Node>,
    run: &RunNames,
    nodes: Vec<Node>,
    concurrency: usize,
) -> Result<(), kube::Error> {
    let listed = api
        .list(&ListParams::default().labels(&run.selector()))
        .await?;
    let bare: BTreeSet<String> = listed
        .items
        .into_iter()
        .filter(|n| {
            n.status
                .as_ref()
                .and_then(|s| s.allocatable.as_ref())
                .is_none()
        })
        .filter_map(|n| n.metadata.name)
        .collect();
    futures::stream::iter(
        nodes
            .into_iter()
            .filter(|n| n.metadata.name.as_ref().is_some_and(|m| bare.contains(m))),
    )
    .map(|n| async move {
        let name = n.metadata.name.clone().unwrap_or_default();
        let patch = serde_json::json!({ "status": n.status });
        api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map(|_| ())
    })
    .buffer_unordered(concurrency.max(1))
    .try_collect::<Vec<()>>()
    .await
    .map(|_| ())
}

/// The scheduler child, its stderr log and config.
struct Scheduler {
    child: Option<Child>,
    stderr: PathBuf,
}

impl Scheduler {
    /// Ends the child: SIGTERM (a clean shutdown), then SIGKILL after 5 s.
    fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let _ = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .stderr(Stdio::null())
            .status();
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
    }

    /// `Some(status)` when the child has exited.
    fn exited(&mut self) -> Option<String> {
        let child = self.child.as_mut()?;
        match child.try_wait() {
            Ok(Some(s)) => Some(s.to_string()),
            _ => None,
        }
    }

    fn stderr_tail(&self) -> String {
        tail(&self.stderr, 4096)
    }
}

fn tail(path: &Path, bytes: u64) -> String {
    let Ok(mut f) = std::fs::File::open(path) else {
        return String::new();
    };
    let len = f.metadata().map_or(0, |m| m.len());
    let _ = f.seek(SeekFrom::Start(len.saturating_sub(bytes)));
    let mut buf = Vec::new();
    let _ = f.read_to_end(&mut buf);
    String::from_utf8_lossy(&buf).into_owned()
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
    let w = workloads::build(name, nodes, init, measured)
        .ok_or_else(|| BenchError::UnknownWorkload(name.to_string()))?;
    let run = RunNames::fresh();
    let dir = std::env::temp_dir().join(format!("ferrosched-bench-{}", run.id));
    std::fs::create_dir_all(&dir).map_err(|e| BenchError::Io(format!("{}: {e}", dir.display())))?;
    let scheduler = Arc::new(Mutex::new(Scheduler {
        child: None,
        stderr: dir.join("scheduler.log"),
    }));
    let tracker = Arc::new(Mutex::new(Tracker::default()));
    let result = tokio::select! {
        r = drive(opts, &w, &run, &dir, &scheduler, &tracker) => r,
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
        for e in cleanup(&opts.client, &run).await {
            eprintln!("cleanup of run {}: {e}", run.id);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    result
}

async fn drive(
    opts: &BenchOptions,
    w: &Workload,
    run: &RunNames,
    dir: &Path,
    scheduler: &Mutex<Scheduler>,
    tracker: &Arc<Mutex<Tracker>>,
) -> Result<ClusterBenchResult, BenchError> {
    let client = &opts.client;
    let io = |e: std::io::Error| BenchError::Io(e.to_string());
    let config = dir.join("scheduler.yaml");
    std::fs::write(&config, scheduler_config(run, &w.name)).map_err(io)?;

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
    let watch = tokio::spawn(track(pods.clone(), run.selector(), Arc::clone(tracker)));
    let _abort_watch = AbortOnDrop(watch);

    // The scheduler starts after the nodes exist, so it lists them instead of taking
    // thousands of watch events.
    let stderr = std::fs::File::create(&scheduler.lock().unwrap().stderr).map_err(io)?;
    let child = Command::new(&opts.scheduler_exe)
        .arg("run")
        .arg("--config")
        .arg(&config)
        .arg("--kubeconfig")
        .arg(&opts.kubeconfig)
        .args(["--secure-port", "0"])
        // Plain text in the log we show on a stall.
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .map_err(|e| BenchError::Io(format!("{}: {e}", opts.scheduler_exe.display())))?;
    let pid = child.id();
    scheduler.lock().unwrap().child = Some(child);

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
    create_all(&pods, init, opts.concurrency).await?;
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

    let cpu_before = process_cpu_seconds(pid).unwrap_or(0.0);
    let mut stalled_in = (!init_done).then_some("init");
    let mut create_rate = 0.0;
    if init_done {
        let measured: Vec<Pod> = w
            .measured_pods
            .iter()
            .map(|p| bench_pod(run, "measured", p))
            .collect();
        let t = Instant::now();
        create_all(&pods, measured, opts.concurrency).await?;
        create_rate = w.measured_pods.len() as f64 / t.elapsed().as_secs_f64().max(1e-9);
        let n = w.measured_pods.len();
        if !wait_bound(opts, scheduler, tracker, |t| t.measured_bound.len() >= n).await? {
            stalled_in = Some("measured");
        }
    }
    let cpu_after = process_cpu_seconds(pid).unwrap_or(0.0);
    let peak_rss_mib = process_peak_rss_mib(pid).unwrap_or(0.0);

    let t = tracker.lock().unwrap();
    let mut times = t.measured_bound.clone();
    times.sort_unstable();
    let origin = times.first().copied();
    let since: Vec<Duration> = times
        .iter()
        .map(|i| i.duration_since(origin.unwrap_or(*i)))
        .collect();
    let span = since.last().map_or(0.0, Duration::as_secs_f64);
    let scheduled = times.len();
    let measured_cpu = cpu_after - cpu_before;
    let complete = stalled_in.is_none();
    Ok(ClusterBenchResult {
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
        cpu_seconds: cpu_after,
        measured_cpu_seconds: measured_cpu,
        cpu_ms_per_pod: measured_cpu * 1000.0 / scheduled.max(1) as f64,
        peak_rss_mib,
        complete,
        note: stalled_in.map(|phase| {
            format!(
                "no {phase} pod was bound for {}s; partial results",
                opts.stall_timeout.as_secs()
            )
        }),
        scheduler_stderr_tail: (!complete).then(|| scheduler.lock().unwrap().stderr_tail()),
    })
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

/// Deletes everything a run created, by its label: pods (no grace period: no kubelet will
/// confirm), the namespace, nodes and PriorityClasses. Returns the errors.
pub async fn cleanup(client: &Client, run: &RunNames) -> Vec<String> {
    let lp = ListParams::default().labels(&run.selector());
    let dp = DeleteParams::default().grace_period(0);
    let mut errors = Vec::new();
    let mut note = |what: &str, r: Result<(), kube::Error>| match r {
        Err(e) if status_code(&e) != Some(404) => errors.push(format!("{what}: {e}")),
        _ => {}
    };
    let pods: Api<Pod> = Api::namespaced(client.clone(), &run.namespace);
    note("pods", pods.delete_collection(&dp, &lp).await.map(|_| ()));
    let namespaces: Api<Namespace> = Api::all(client.clone());
    note(
        "namespace",
        namespaces
            .delete(&run.namespace, &DeleteParams::default())
            .await
            .map(|_| ()),
    );
    let nodes: Api<Node> = Api::all(client.clone());
    note("nodes", nodes.delete_collection(&dp, &lp).await.map(|_| ()));
    let classes: Api<PriorityClass> = Api::all(client.clone());
    note(
        "priorityclasses",
        classes.delete_collection(&dp, &lp).await.map(|_| ()),
    );
    errors
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pods_and_nodes_belong_to_the_run_only() {
        let run = RunNames::new("abc");
        let w = workloads::build("PreemptionBasic", 3, 0, 2).unwrap();
        let n = bench_node(&run, 7, &w.nodes[0]);
        assert_eq!(
            n.metadata.name.as_deref(),
            Some("ferrosched-bench-abc-node-7")
        );
        let labels = n.metadata.labels.as_ref().unwrap();
        assert_eq!(labels[RUN_LABEL], "abc");
        assert_eq!(
            labels["kubernetes.io/hostname"],
            "ferrosched-bench-abc-node-7"
        );
        assert_eq!(labels["topology.kubernetes.io/zone"], "zone-a");
        let taints = n.spec.as_ref().unwrap().taints.as_ref().unwrap();
        assert_eq!(taints[0].key, TAINT_KEY);

        let p = bench_pod(&run, "measured", &w.measured_pods[0]);
        assert_eq!(
            p.metadata.namespace.as_deref(),
            Some("ferrosched-bench-abc")
        );
        assert!(p.metadata.uid.is_none());
        let s = p.spec.as_ref().unwrap();
        assert_eq!(s.scheduler_name.as_deref(), Some("ferrosched-bench-abc"));
        assert_eq!(s.node_selector.as_ref().unwrap()[RUN_LABEL], "abc");
        assert_eq!(s.priority, Some(1000));
        assert_eq!(
            s.priority_class_name.as_deref(),
            Some("ferrosched-bench-abc-p1000")
        );
        let all: Vec<Pod> = w
            .init_pods
            .iter()
            .chain(&w.measured_pods)
            .cloned()
            .collect();
        let classes = priority_classes(&run, &all);
        let values: Vec<i32> = classes.iter().map(|c| c.value).collect();
        assert_eq!(values, vec![0, 1000]);
    }

    #[test]
    fn generated_configs_are_valid() {
        let run = RunNames::new("abc");
        for w in ["SchedulingBasic", "MixedProfiles"] {
            let loaded = scheduler_core::config::load_str(&scheduler_config(&run, w), "<bench>")
                .unwrap_or_else(|e| panic!("{w}: {e}"));
            assert!(!loaded.config.leader_election.leader_elect);
            assert_eq!(loaded.config.client_connection.qps, 5000.0);
        }
        let mixed = workloads::build("MixedProfiles", 1, 0, 2).unwrap();
        let p = bench_pod(&run, "measured", &mixed.measured_pods[1]);
        assert_eq!(
            p.spec.unwrap().scheduler_name.as_deref(),
            Some("ferrosched-bench-abc-bin-packing")
        );
    }

    #[test]
    fn throughput_samples_per_second_like_scheduler_perf() {
        let ms = Duration::from_millis;
        // 3 in the first second, 1 in the second, 2 in a final 0.6 s window.
        let t = throughput(&[ms(0), ms(100), ms(900), ms(1500), ms(2200), ms(2600)]);
        let close = |a: f64, b: f64| (a - b).abs() < 1e-6;
        assert_eq!(t.samples, 3);
        assert!(close(t.perc50, 3.0), "{t:?}");
        assert!(close(t.perc90, 2.0 / 0.6), "{t:?}");
        assert!(close(t.perc99, 2.0 / 0.6), "{t:?}");
        assert!(close(t.average, (3.0 + 1.0 + 2.0 / 0.6) / 3.0), "{t:?}");
        // Shorter than a second: one sample.
        let t = throughput(&[ms(0), ms(500)]);
        assert_eq!((t.samples, t.average), (1, 4.0));
        assert_eq!(throughput(&[]), Throughput::default());
    }

    #[test]
    fn reads_this_process_cpu_and_rss() {
        if cfg!(target_os = "linux") {
            let pid = std::process::id();
            assert!(process_cpu_seconds(pid).is_some());
            assert!(process_peak_rss_mib(pid).unwrap() > 0.0);
        }
    }
}
