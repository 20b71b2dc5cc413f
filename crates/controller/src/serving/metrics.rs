//! Prometheus metrics under kube-scheduler's names (`pkg/scheduler/metrics/metrics.go`),
//! served at `/metrics` by the health server in the OpenMetrics text format (which
//! Prometheus scrapes natively; counters carry the `_total` suffix there too).
//!
//! What is measured where:
//! - `scheduler_schedule_attempts_total{result,profile}` and
//!   `scheduler_scheduling_attempt_duration_seconds{result,profile}`: `unschedulable` and
//!   `error` when the scheduling cycle fails, `scheduled` when the binding succeeds and
//!   `error` when it fails; the duration runs from the pop to that point, as upstream.
//! - `scheduler_pod_scheduling_sli_duration_seconds{attempts}`: from the pod's first pop
//!   (the queue's `initial_attempt_timestamp`) to a successful binding.
//! - `scheduler_pending_pods{queue}`: read from the queue at scrape time.
//! - `scheduler_preemption_attempts_total` (PostFilter ran) and `scheduler_preemption_victims`
//!   (victims of the chosen candidate); `scheduler_preemption_goroutines_duration_seconds{result}`
//!   and `scheduler_preemption_goroutines_execution_total{result}` (`success`/`error`) for each
//!   asynchronous preemption the executor carried out.
//! - `scheduler_framework_extension_point_duration_seconds{extension_point,status,profile}`:
//!   PreFilter, Filter (the whole node loop), PostFilter, PreScore, Score (with
//!   normalisation), Reserve and Permit from scheduler-core's cycle timings (every
//!   cycle); `PreBind` (VolumeBinding's API writes and the wait for claims, for every pod), `Bind` (the Binding API call), `PostBind` and `Unreserve` where the controller
//!   runs them.
//! - `scheduler_plugin_execution_duration_seconds{plugin,extension_point,status}`: on one
//!   cycle in ten (upstream samples 10%), each plugin call at the once-per-cycle points; for
//!   Filter and Score, one observation per plugin and status: its total over the nodes of
//!   that cycle (upstream observes every per-node call).
//! - `scheduler_queue_incoming_pods_total{queue,event}` and
//!   `scheduler_unschedulable_pods{plugin,profile}`: read at scrape time from the queue's
//!   [`QueueCounters`]. A pod counts under its rejecting plugins (or its gating PreEnqueue
//!   plugin) from the rejection until it is popped again, as upstream, or deleted (upstream
//!   leaves deleted pods counted).
//! - `scheduler_event_handling_duration_seconds{event}`: each informer event's handling,
//!   waiting for the state lock included, labelled `<Resource><Action>` as upstream's
//!   handlers (`NodeAdd`, `AssignedPodUpdate`, `UnschedulablePodDelete`, ...); one
//!   observation per event (upstream observes a node update once per classified change).
//! - `scheduler_batch_attempts_total{profile,result}` (`hint_used`, `hint_not_used`,
//!   `no_hint`) and `scheduler_batch_cache_flushed_total{profile,reason}`: opportunistic
//!   batching's counts, added after each attempt under the attempt's profile. (Upstream's
//!   later `scheduler_batch_rescore_attempts_total` is not exported: ferrosched does not
//!   re-score a hinted node.)
//! - `leader_election_master_status{name}` (client-go's): 1 while this process holds the
//!   lease `name`, 0 once it lost or released it; absent without leader election.
//! - `scheduler_scheduling_algorithm_duration_seconds`: the framework run of a scheduling
//!   cycle that found a node (upstream: `SchedulePod`, observed only on success).
//! - `scheduler_pod_scheduling_attempts`: attempts a bound pod took, at its binding.
//! - `scheduler_goroutines{operation="binding"}`: binding cycles in flight (PreBind, Bind).
//! - `scheduler_scheduler_cache_size{type}`: `nodes`, `pods`, `assumed_pods`, read from the
//!   cache at scrape time (upstream sets them once a second).
//! - `rest_client_requests_total` and `rest_client_request_duration_seconds`: every API
//!   request ([`crate::client::metrics`]).
//! - `process_*`: from `/proc/self` at scrape time ([`super::process`]).

use std::sync::Mutex;
use std::time::Duration;

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use scheduler_core::framework::{BatchStats, CycleTimings, ExtensionPoint};
use scheduler_core::queue::{PendingCounts, QueueCounters, QueueKind};

type Labels<const N: usize> = [(&'static str, String); N];
type HistogramFamily<const N: usize> = Family<Labels<N>, Histogram, fn() -> Histogram>;

pub(crate) const RESULT_SCHEDULED: &str = "scheduled";
pub(crate) const RESULT_UNSCHEDULABLE: &str = "unschedulable";
pub(crate) const RESULT_ERROR: &str = "error";

fn attempt_buckets() -> Histogram {
    // Upstream: ExponentialBuckets(0.001, 2, 15).
    Histogram::new(exponential_buckets(0.001, 2.0, 15))
}

fn preemption_goroutine_buckets() -> Histogram {
    // Upstream: ExponentialBuckets(0.01, 2, 20).
    Histogram::new(exponential_buckets(0.01, 2.0, 20))
}

fn sli_buckets() -> Histogram {
    // Upstream: ExponentialBuckets(0.01, 2, 20).
    Histogram::new(exponential_buckets(0.01, 2.0, 20))
}

fn plugin_buckets() -> Histogram {
    // Upstream: ExponentialBuckets(0.00001, 1.5, 20).
    Histogram::new(exponential_buckets(0.00001, 1.5, 20))
}

fn extension_point_buckets() -> Histogram {
    // Upstream: ExponentialBuckets(0.0001, 2, 12).
    Histogram::new(exponential_buckets(0.0001, 2.0, 12))
}

fn event_handling_buckets() -> Histogram {
    // Upstream: ExponentialBuckets(0.0001, 2, 12).
    Histogram::new(exponential_buckets(0.0001, 2.0, 12))
}

/// The scheduler cache's counts, read at scrape time.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct CacheSizes {
    pub(crate) nodes: usize,
    pub(crate) pods: usize,
    pub(crate) assumed_pods: usize,
}

/// The `process_*` metrics, set from [`super::process::read`] at each scrape.
struct ProcessMetrics {
    cpu: Counter<f64, AtomicU64>,
    resident: Gauge,
    virtual_memory: Gauge,
    start_time: Gauge<f64, AtomicU64>,
    open_fds: Gauge,
    max_fds: Gauge,
}

impl ProcessMetrics {
    fn register(registry: &mut Registry) -> Self {
        let m = ProcessMetrics {
            cpu: Counter::default(),
            resident: Gauge::default(),
            virtual_memory: Gauge::default(),
            start_time: Gauge::default(),
            open_fds: Gauge::default(),
            max_fds: Gauge::default(),
        };
        registry.register(
            "process_cpu_seconds",
            "Total user and system CPU time spent in seconds.",
            m.cpu.clone(),
        );
        registry.register(
            "process_resident_memory_bytes",
            "Resident memory size in bytes.",
            m.resident.clone(),
        );
        registry.register(
            "process_virtual_memory_bytes",
            "Virtual memory size in bytes.",
            m.virtual_memory.clone(),
        );
        registry.register(
            "process_start_time_seconds",
            "Start time of the process since unix epoch in seconds.",
            m.start_time.clone(),
        );
        registry.register(
            "process_open_fds",
            "Number of open file descriptors.",
            m.open_fds.clone(),
        );
        registry.register(
            "process_max_fds",
            "Maximum number of open file descriptors.",
            m.max_fds.clone(),
        );
        m
    }

    fn update(&self, s: &super::process::ProcessStats) {
        let cpu = s.cpu_seconds - self.cpu.get();
        if cpu > 0.0 {
            self.cpu.inc_by(cpu);
        }
        let int = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        self.resident.set(int(s.resident_bytes));
        self.virtual_memory.set(int(s.virtual_bytes));
        self.start_time.set(s.start_time_seconds);
        self.open_fds.set(int(s.open_fds));
        self.max_fds.set(s.max_fds.map_or(i64::MAX, int));
    }
}

pub(crate) struct Metrics {
    registry: Registry,
    algorithm_duration: Histogram,
    pod_attempts: Histogram,
    goroutines: Family<Labels<1>, Gauge>,
    cache_size: Family<Labels<1>, Gauge>,
    process: ProcessMetrics,
    /// Serialises [`render`](Self::render)'s catching up of the incoming-pods counters.
    render_lock: Mutex<()>,
    incoming_pods: Family<Labels<2>, Counter>,
    unschedulable_pods: Family<Labels<2>, Gauge>,
    event_handling: HistogramFamily<1>,
    schedule_attempts: Family<Labels<2>, Counter>,
    attempt_duration: HistogramFamily<2>,
    sli_duration: HistogramFamily<1>,
    pending_pods: Family<Labels<1>, Gauge>,
    preemption_attempts: Counter,
    preemption_victims: Histogram,
    preemption_goroutines: HistogramFamily<1>,
    preemption_goroutines_total: Family<Labels<1>, Counter>,
    extension_point_duration: HistogramFamily<3>,
    plugin_duration: HistogramFamily<3>,
    leader_status: Family<Labels<1>, Gauge>,
    batch_attempts: Family<Labels<2>, Counter>,
    batch_cache_flushed: Family<Labels<2>, Counter>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub(crate) fn new() -> Self {
        let mut registry = Registry::default();
        let schedule_attempts = Family::<Labels<2>, Counter>::default();
        registry.register(
            "scheduler_schedule_attempts",
            "Number of attempts to schedule pods, by the result. 'unschedulable' means a pod could not be scheduled, while 'error' means an internal scheduler problem.",
            schedule_attempts.clone(),
        );
        let attempt_duration: HistogramFamily<2> =
            Family::new_with_constructor(attempt_buckets as fn() -> Histogram);
        registry.register(
            "scheduler_scheduling_attempt_duration_seconds",
            "Scheduling attempt latency in seconds (scheduling algorithm + binding)",
            attempt_duration.clone(),
        );
        let sli_duration: HistogramFamily<1> =
            Family::new_with_constructor(sli_buckets as fn() -> Histogram);
        registry.register(
            "scheduler_pod_scheduling_sli_duration_seconds",
            "E2e latency for a pod being scheduled, from the time the pod enters the scheduling queue and might involve multiple scheduling attempts.",
            sli_duration.clone(),
        );
        let pending_pods = Family::<Labels<1>, Gauge>::default();
        registry.register(
            "scheduler_pending_pods",
            "Number of pending pods, by the queue type. 'active' means number of pods in activeQ; 'backoff' means number of pods in backoffQ; 'unschedulable' means number of pods in unschedulablePods that the scheduler attempted to schedule and failed; 'gated' is the number of unschedulable pods that the scheduler never attempted to schedule because they are gated.",
            pending_pods.clone(),
        );
        let preemption_attempts = Counter::default();
        registry.register(
            "scheduler_preemption_attempts",
            "Total preemption attempts in the cluster till now",
            preemption_attempts.clone(),
        );
        // Upstream: ExponentialBuckets(1, 2, 7).
        let preemption_victims = Histogram::new(exponential_buckets(1.0, 2.0, 7));
        registry.register(
            "scheduler_preemption_victims",
            "Number of selected preemption victims",
            preemption_victims.clone(),
        );
        let preemption_goroutines: HistogramFamily<1> =
            Family::new_with_constructor(preemption_goroutine_buckets as fn() -> Histogram);
        registry.register(
            "scheduler_preemption_goroutines_duration_seconds",
            "Duration in seconds for running goroutines for the preemption.",
            preemption_goroutines.clone(),
        );
        let preemption_goroutines_total = Family::<Labels<1>, Counter>::default();
        registry.register(
            "scheduler_preemption_goroutines_execution",
            "Number of preemption goroutines executed.",
            preemption_goroutines_total.clone(),
        );
        let extension_point_duration: HistogramFamily<3> =
            Family::new_with_constructor(extension_point_buckets as fn() -> Histogram);
        registry.register(
            "scheduler_framework_extension_point_duration_seconds",
            "Latency for running all plugins of a specific extension point.",
            extension_point_duration.clone(),
        );
        let plugin_duration: HistogramFamily<3> =
            Family::new_with_constructor(plugin_buckets as fn() -> Histogram);
        registry.register(
            "scheduler_plugin_execution_duration_seconds",
            "Duration for running a plugin at a specific extension point.",
            plugin_duration.clone(),
        );
        let incoming_pods = Family::<Labels<2>, Counter>::default();
        registry.register(
            "scheduler_queue_incoming_pods",
            "Number of pods added to scheduling queues by event and queue type.",
            incoming_pods.clone(),
        );
        let unschedulable_pods = Family::<Labels<2>, Gauge>::default();
        registry.register(
            "scheduler_unschedulable_pods",
            "The number of unschedulable pods broken down by plugin name. A pod will increment the gauge for all plugins that caused it to not schedule and so this metric have meaning only when broken down by plugin.",
            unschedulable_pods.clone(),
        );
        let event_handling: HistogramFamily<1> =
            Family::new_with_constructor(event_handling_buckets as fn() -> Histogram);
        registry.register(
            "scheduler_event_handling_duration_seconds",
            "Event handling latency in seconds.",
            event_handling.clone(),
        );
        let leader_status = Family::<Labels<1>, Gauge>::default();
        registry.register(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. 'name' is the string used to identify the lease. Please make sure to group by name.",
            leader_status.clone(),
        );
        let batch_attempts = Family::<Labels<2>, Counter>::default();
        registry.register(
            "scheduler_batch_attempts",
            "Counts of results when we attempt to use batching.",
            batch_attempts.clone(),
        );
        let batch_cache_flushed = Family::<Labels<2>, Counter>::default();
        registry.register(
            "scheduler_batch_cache_flushed",
            "Counts of cache flushes by reason.",
            batch_cache_flushed.clone(),
        );
        // Upstream: ExponentialBuckets(0.001, 2, 15), no labels.
        let algorithm_duration = Histogram::new(exponential_buckets(0.001, 2.0, 15));
        registry.register(
            "scheduler_scheduling_algorithm_duration_seconds",
            "Scheduling algorithm latency in seconds",
            algorithm_duration.clone(),
        );
        // Upstream: ExponentialBuckets(1, 2, 5).
        let pod_attempts = Histogram::new(exponential_buckets(1.0, 2.0, 5));
        registry.register(
            "scheduler_pod_scheduling_attempts",
            "Number of attempts to successfully schedule a pod.",
            pod_attempts.clone(),
        );
        let goroutines = Family::<Labels<1>, Gauge>::default();
        registry.register(
            "scheduler_goroutines",
            "Number of running goroutines split by the work they do such as binding.",
            goroutines.clone(),
        );
        // Present from the start, as upstream's binding gauge once the first cycle ran.
        let _ = goroutines.get_or_create(&[("operation", "binding".to_string())]);
        let cache_size = Family::<Labels<1>, Gauge>::default();
        registry.register(
            "scheduler_scheduler_cache_size",
            "Number of nodes, pods, and assumed (bound) pods in the scheduler cache.",
            cache_size.clone(),
        );
        let rest = crate::client::metrics::rest_client_metrics();
        registry.register(
            "rest_client_requests",
            "Number of HTTP requests, partitioned by status code, method, and host.",
            rest.requests.clone(),
        );
        registry.register(
            "rest_client_request_duration_seconds",
            "Request latency in seconds. Broken down by verb, and host.",
            rest.latency.clone(),
        );
        let process = ProcessMetrics::register(&mut registry);
        Metrics {
            algorithm_duration,
            pod_attempts,
            goroutines,
            cache_size,
            process,
            batch_attempts,
            batch_cache_flushed,
            leader_status,
            registry,
            render_lock: Mutex::new(()),
            incoming_pods,
            unschedulable_pods,
            event_handling,
            schedule_attempts,
            attempt_duration,
            sli_duration,
            pending_pods,
            preemption_attempts,
            preemption_victims,
            preemption_goroutines,
            preemption_goroutines_total,
            extension_point_duration,
            plugin_duration,
        }
    }

    /// Whether this process leads on the lease `name`.
    pub(crate) fn leading(&self, name: &str, leading: bool) {
        self.leader_status
            .get_or_create(&[("name", name.to_string())])
            .set(i64::from(leading));
    }

    /// What scheduler-core measured in one scheduling cycle of `profile`.
    pub(crate) fn cycle(&self, profile: &str, t: &CycleTimings) {
        // PreBind's point duration is observed once, by the binding cycle, where its real
        // work (VolumeBinding's API writes and the wait) happens; scheduler-core's part is
        // only the decision. Its plugins' sampled timings are still exported below.
        for p in t
            .points
            .iter()
            .filter(|p| p.point != ExtensionPoint::PreBind)
        {
            self.extension_point(p.point.display_name(), p.code.as_str(), profile, p.took);
        }
        for p in &t.plugins {
            self.plugin_duration
                .get_or_create(&[
                    ("plugin", p.plugin.to_string()),
                    ("extension_point", p.point.display_name().to_string()),
                    ("status", p.code.as_str().to_string()),
                ])
                .observe(p.took.as_secs_f64());
        }
    }

    /// Opportunistic batching's counts from attempts of `profile`.
    pub(crate) fn batch(&self, profile: &str, stats: &BatchStats) {
        for (result, n) in &stats.attempts {
            self.batch_attempts
                .get_or_create(&[
                    ("profile", profile.to_string()),
                    ("result", result.to_string()),
                ])
                .inc_by(*n);
        }
        for (reason, n) in &stats.flushed {
            self.batch_cache_flushed
                .get_or_create(&[
                    ("profile", profile.to_string()),
                    ("reason", reason.to_string()),
                ])
                .inc_by(*n);
        }
    }

    /// One finished attempt: `result` is one of the `RESULT_*` constants.
    pub(crate) fn attempt(&self, result: &'static str, profile: &str, took: Duration) {
        let labels = [
            ("result", result.to_string()),
            ("profile", profile.to_string()),
        ];
        self.schedule_attempts.get_or_create(&labels).inc();
        self.attempt_duration
            .get_or_create(&labels)
            .observe(took.as_secs_f64());
    }

    /// A pod bound after `attempts` attempts, `took` after its first one started.
    pub(crate) fn scheduled_e2e(&self, attempts: u32, took: Duration) {
        self.pod_attempts.observe(f64::from(attempts));
        let label = if attempts >= 15 {
            "15+".to_string()
        } else {
            attempts.to_string()
        };
        self.sli_duration
            .get_or_create(&[("attempts", label)])
            .observe(took.as_secs_f64());
    }

    /// A scheduling cycle's framework run that found a node.
    pub(crate) fn algorithm(&self, took: Duration) {
        self.algorithm_duration.observe(took.as_secs_f64());
    }

    /// A binding cycle started; the guard ends it when dropped.
    pub(crate) fn binding_started(&self) -> BindingGuard {
        let g = self
            .goroutines
            .get_or_create(&[("operation", "binding".to_string())])
            .clone();
        g.inc();
        BindingGuard { gauge: g }
    }

    pub(crate) fn preemption_attempt(&self) {
        self.preemption_attempts.inc();
    }

    pub(crate) fn preemption_victims(&self, n: usize) {
        self.preemption_victims.observe(n as f64);
    }

    /// One asynchronous preemption carried out (victims deleted, or a call failed).
    pub(crate) fn preemption_goroutine(&self, succeeded: bool, took: Duration) {
        let labels = [(
            "result",
            if succeeded { "success" } else { "error" }.to_string(),
        )];
        self.preemption_goroutines
            .get_or_create(&labels)
            .observe(took.as_secs_f64());
        self.preemption_goroutines_total
            .get_or_create(&labels)
            .inc();
    }

    /// `status` is upstream's status code string (`Success`, `Error`, ...).
    pub(crate) fn extension_point(
        &self,
        point: &'static str,
        status: &str,
        profile: &str,
        took: Duration,
    ) {
        self.extension_point_duration
            .get_or_create(&[
                ("extension_point", point.to_string()),
                ("status", status.to_string()),
                ("profile", profile.to_string()),
            ])
            .observe(took.as_secs_f64());
    }

    /// One informer event handled; `event` is upstream's label (`NodeAdd`, ...).
    pub(crate) fn event_handled(&self, event: String, took: Duration) {
        self.event_handling
            .get_or_create(&[("event", event)])
            .observe(took.as_secs_f64());
    }

    /// The exposition, with `scheduler_pending_pods` set from `pending` and the queue's
    /// metrics from `counters`.
    pub(crate) fn render(
        &self,
        pending: PendingCounts,
        counters: &QueueCounters,
        cache: CacheSizes,
    ) -> String {
        let guard = self.render_lock.lock().unwrap_or_else(|e| e.into_inner());
        for (kind, n) in [
            ("nodes", cache.nodes),
            ("pods", cache.pods),
            ("assumed_pods", cache.assumed_pods),
        ] {
            self.cache_size
                .get_or_create(&[("type", kind.to_string())])
                .set(i64::try_from(n).unwrap_or(i64::MAX));
        }
        if let Some(stats) = super::process::read() {
            self.process.update(&stats);
        }
        for ((kind, event), n) in &counters.incoming {
            let queue = match kind {
                QueueKind::Active => "active",
                QueueKind::Backoff => "backoff",
                QueueKind::Unschedulable | QueueKind::Gated => "unschedulable",
            };
            let c = self
                .incoming_pods
                .get_or_create(&[("queue", queue.to_string()), ("event", event.label())]);
            c.inc_by(n.saturating_sub(c.get()));
        }
        for (profile, plugins) in &counters.unschedulable {
            for (plugin, n) in plugins {
                self.unschedulable_pods
                    .get_or_create(&[("plugin", plugin.to_string()), ("profile", profile.clone())])
                    .set(*n);
            }
        }
        for (queue, n) in [
            ("active", pending.active),
            ("backoff", pending.backoff),
            ("unschedulable", pending.unschedulable),
            ("gated", pending.gated),
        ] {
            self.pending_pods
                .get_or_create(&[("queue", queue.to_string())])
                .set(i64::try_from(n).unwrap_or(i64::MAX));
        }
        let mut out = String::new();
        if let Err(e) = encode(&mut out, &self.registry) {
            tracing::warn!(error = %e, "could not encode metrics");
        }
        drop(guard);
        out
    }
}

/// Counts one binding cycle in `scheduler_goroutines{operation="binding"}` while alive.
pub(crate) struct BindingGuard {
    gauge: Gauge,
}

impl Drop for BindingGuard {
    fn drop(&mut self) {
        self.gauge.dec();
    }
}

/// The content type of [`Metrics::render`]'s output.
pub(crate) const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[cfg(test)]
mod tests {
    use super::*;

    use scheduler_core::framework::{Code, ExtensionPoint, PluginTiming, PointTiming};
    use scheduler_core::queue::IncomingEvent;

    #[test]
    fn renders_upstream_names() {
        let m = Metrics::new();
        m.attempt(
            RESULT_SCHEDULED,
            "default-scheduler",
            Duration::from_millis(3),
        );
        m.preemption_attempt();
        m.preemption_victims(2);
        m.scheduled_e2e(1, Duration::from_millis(20));
        m.extension_point(
            "Bind",
            "Success",
            "default-scheduler",
            Duration::from_millis(1),
        );
        m.cycle(
            "default-scheduler",
            &CycleTimings {
                points: vec![PointTiming {
                    point: ExtensionPoint::Filter,
                    code: Code::Success,
                    took: Duration::from_micros(50),
                }],
                plugins: vec![PluginTiming {
                    plugin: "NodeResourcesFit",
                    point: ExtensionPoint::Filter,
                    code: Code::Unschedulable,
                    took: Duration::from_micros(20),
                    calls: 7,
                }],
            },
        );
        m.event_handled("NodeAdd".into(), Duration::from_micros(30));
        let mut batch = BatchStats::default();
        batch
            .attempts
            .insert(scheduler_core::framework::HINT_USED, 2);
        batch.flushed.insert("node_not_full", 1);
        m.batch("default-scheduler", &batch);
        m.batch("default-scheduler", &batch);
        let mut counters = QueueCounters::default();
        counters
            .incoming
            .insert((QueueKind::Gated, IncomingEvent::ScheduleAttemptFailure), 2);
        counters.unschedulable.insert(
            "default-scheduler".into(),
            [("NodeResourcesFit", 3), ("NodeAffinity", 0)].into(),
        );
        let pending = PendingCounts {
            active: 1,
            backoff: 2,
            unschedulable: 3,
            gated: 4,
        };
        m.render(pending, &counters, CacheSizes::default());
        // Counters catch up with the queue's counts, never count twice.
        counters
            .incoming
            .insert((QueueKind::Gated, IncomingEvent::ScheduleAttemptFailure), 5);
        m.render(pending, &counters, CacheSizes::default());
        let binding = m.binding_started();
        assert!(
            m.render(pending, &counters, CacheSizes::default())
                .contains("scheduler_goroutines{operation=\"binding\"} 1")
        );
        drop(binding);
        let text = m.render(
            pending,
            &counters,
            CacheSizes {
                nodes: 3,
                pods: 5,
                assumed_pods: 1,
            },
        );
        for line in [
            "scheduler_schedule_attempts_total{result=\"scheduled\",profile=\"default-scheduler\"} 1",
            "scheduler_scheduling_attempt_duration_seconds_count{result=\"scheduled\",profile=\"default-scheduler\"} 1",
            "scheduler_pod_scheduling_sli_duration_seconds_count{attempts=\"1\"} 1",
            "scheduler_pending_pods{queue=\"unschedulable\"} 3",
            "scheduler_pending_pods{queue=\"gated\"} 4",
            "scheduler_preemption_attempts_total 1",
            "scheduler_queue_incoming_pods_total{queue=\"unschedulable\",event=\"ScheduleAttemptFailure\"} 5",
            "scheduler_unschedulable_pods{plugin=\"NodeResourcesFit\",profile=\"default-scheduler\"} 3",
            "scheduler_unschedulable_pods{plugin=\"NodeAffinity\",profile=\"default-scheduler\"} 0",
            "scheduler_event_handling_duration_seconds_count{event=\"NodeAdd\"} 1",
            "scheduler_preemption_victims_sum 2.0",
            "scheduler_framework_extension_point_duration_seconds_count{extension_point=\"Bind\",status=\"Success\",profile=\"default-scheduler\"} 1",
            "scheduler_framework_extension_point_duration_seconds_count{extension_point=\"Filter\",status=\"Success\",profile=\"default-scheduler\"} 1",
            "scheduler_plugin_execution_duration_seconds_count{plugin=\"NodeResourcesFit\",extension_point=\"Filter\",status=\"Unschedulable\"} 1",
            "scheduler_batch_attempts_total{profile=\"default-scheduler\",result=\"hint_used\"} 4",
            "scheduler_batch_cache_flushed_total{profile=\"default-scheduler\",reason=\"node_not_full\"} 2",
            "scheduler_scheduler_cache_size{type=\"nodes\"} 3",
            "scheduler_scheduler_cache_size{type=\"assumed_pods\"} 1",
            "scheduler_pod_scheduling_attempts_count 1",
            "scheduler_goroutines{operation=\"binding\"} 0",
        ] {
            assert!(text.contains(line), "missing {line} in\n{text}");
        }
    }
}
