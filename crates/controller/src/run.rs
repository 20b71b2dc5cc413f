//! Wires the controller together: the registry and profiles, the shared state, the
//! informers, the periodic queue flushes, the health server, leader election, the binding
//! executor and the scheduling thread, and the order they start and stop in. Owns no logic
//! of its own beyond that order.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use scheduler_core::config::Loaded;
use scheduler_core::framework::{ProfileRegistry, Registry};
use scheduler_core::pod_group_manager::PodGroupManager;
use scheduler_core::queue::{Clock, QueueConfig, QueueProfiles, SchedulingQueue, SystemClock};
use scheduler_core::schedule_one::SchedulingAlgorithm;
use scheduler_core::types::pod_group::GroupApi;

use crate::binding::event_recorder;
use crate::binding::executor::Executor;
use crate::binding::volumes;
use crate::client::retry;
use crate::extension::{Extension, FailureReporter, QueueEvents};
use crate::serving::health;
use crate::{Error, Result};
use crate::{informers, leader, scheduler_loop, state};

/// Everything [`run`] needs. The config must already be loaded and validated.
pub struct RunOptions {
    pub client: Client,
    pub loaded: Loaded,
    /// Identifies this process in events (`reportingInstance = {schedulerName}-{id}`);
    /// upstream uses the hostname.
    pub instance_id: String,
    /// Resolves when the controller should stop (SIGTERM/SIGINT in production).
    pub shutdown: Pin<Box<dyn Future<Output = ()> + Send>>,
    /// Seed for breaking score ties.
    pub seed: u64,
    /// Where to serve /healthz, /livez, /readyz, /metrics and /configz; `None` serves nothing.
    pub health: Option<tokio::net::TcpListener>,
    /// Serve them over TLS with this config (`ferrosched run` always does); `None`: plain
    /// HTTP (tests).
    pub health_tls: Option<Arc<rustls::ServerConfig>>,
    /// Delegated authentication and authorization for those endpoints (`ferrosched run`
    /// always sets it); `None`: served to anyone (tests).
    pub health_auth: Option<Arc<crate::serving::auth::DelegatedAuth>>,
    /// Timeouts and the connection cap of the TLS health port (default:
    /// [`ServeLimits::secure_port`](crate::serving::conn::ServeLimits::secure_port)).
    pub health_limits: crate::serving::conn::ServeLimits,
    /// The command line's arguments after the subcommand, shown on /flagz; empty: none.
    pub command_line: Vec<String>,
    /// Plugins fed from the cluster by other crates (`ferrosched run`: SchedulingPolicy's
    /// gate when a profile enables it); empty: the in-tree plugins only.
    pub extensions: Vec<Box<dyn Extension>>,
    /// Explanations of attempts (`--explain`, `--explain-annotations`); default: off.
    pub explain: crate::serving::explain::ExplainOptions,
    /// Opportunistic batching (upstream's OpportunisticBatching gate, on by default).
    pub opportunistic_batching: bool,
    /// Device binding conditions (upstream's DRADeviceBindingConditions with
    /// DRAResourceClaimDeviceStatus, on by default since 1.36): off, devices with binding
    /// conditions are never allocated.
    pub dra_device_binding_conditions: bool,
    /// PodGroup claims (upstream's DRAWorkloadResourceClaims, beta and off by default in
    /// 1.37): on, a pod's claim matching its PodGroup's is reserved for the group and
    /// allocated once for all of its pods; off, every claim is the pod's own.
    pub dra_workload_resource_claims: bool,
    /// Device compatibility groups (upstream's DRADeviceCompatibilityGroups, alpha and off
    /// by default in 1.37): on, `consumesCounters[].compatibilityGroups` decide which
    /// devices of a counter set go together; off, devices declaring them are never
    /// allocated.
    pub dra_device_compatibility_groups: bool,
    /// Trees of groups (upstream's CompositePodGroup, alpha and off by default in 1.37): on,
    /// a PodGroup's `parentCompositePodGroupName` is honoured and CompositePodGroups are
    /// watched; off, every PodGroup is its own root.
    pub composite_pod_groups: bool,
}

impl RunOptions {
    /// The options with everything optional at its default: serving nothing, no
    /// extensions, explanations off, the feature gates at upstream's defaults, tie-break
    /// seed 1 and instance id `test-host` (what tests and embedders start from; `ferrosched
    /// run` sets every field).
    pub fn new(
        client: Client,
        loaded: Loaded,
        shutdown: Pin<Box<dyn Future<Output = ()> + Send>>,
    ) -> Self {
        RunOptions {
            client,
            loaded,
            instance_id: "test-host".into(),
            shutdown,
            seed: 1,
            health: None,
            health_tls: None,
            health_auth: None,
            health_limits: crate::serving::conn::ServeLimits::secure_port(),
            command_line: Vec::new(),
            extensions: Vec::new(),
            explain: Default::default(),
            opportunistic_batching: true,
            dra_device_binding_conditions: true,
            dra_workload_resource_claims: false,
            dra_device_compatibility_groups: false,
            composite_pod_groups: false,
        }
    }
}

/// The instance id upstream would use: the hostname.
pub fn default_instance_id() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| {
            std::fs::read_to_string("/etc/hostname")
                .ok()
                .map(|s| s.trim().to_string())
        })
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "ferrosched".to_string())
}

/// How often backoffQ pods whose backoff expired move to activeQ (upstream: 1 s).
pub(crate) const BACKOFF_FLUSH_PERIOD: Duration = Duration::from_secs(1);
/// How often pods that waited too long in the unschedulable pool are retried (upstream: 30 s).
pub(crate) const UNSCHEDULABLE_FLUSH_PERIOD: Duration = Duration::from_secs(30);

/// The queue settings from the config. Popping from backoffQ when activeQ is empty is on
/// (upstream `SchedulerPopFromBackoffQ`): it only takes pods that plugins rejected; pods
/// whose attempt failed with an error (e.g. a failed binding) wait in the error backoffQ
/// until their backoff expires, so a persistent API error is retried with backoff.
pub(crate) fn queue_config(
    cfg: &scheduler_core::config::KubeSchedulerConfiguration,
) -> QueueConfig {
    QueueConfig::from_config(cfg)
}

/// Runs `flush` on the queue every `period` and wakes the scheduling thread when it moved
/// pods. Runs until the task is aborted.
async fn flush_periodically(
    shared: Arc<state::Shared>,
    period: Duration,
    flush: fn(&mut SchedulingQueue) -> usize,
) {
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let moved = flush(&mut shared.lock().queue);
        if moved > 0 {
            shared.notify();
        }
    }
}

/// Watches the cluster and schedules pending pods of the config's profiles until
/// `opts.shutdown` resolves; then stops taking pods, finishes in-flight API calls and
/// returns.
pub async fn run(opts: RunOptions) -> Result<()> {
    let RunOptions {
        client,
        loaded,
        instance_id,
        mut shutdown,
        seed,
        health,
        health_tls,
        health_auth,
        health_limits,
        command_line,
        mut extensions,
        explain,
        opportunistic_batching,
        dra_device_binding_conditions,
        dra_workload_resource_claims,
        dra_device_compatibility_groups,
        composite_pod_groups,
    } = opts;
    let mut registry = Registry::in_tree();
    // The PodGroups and their members, fed by the informers, read by GangScheduling.
    let groups = Arc::new(PodGroupManager::new());
    scheduler_core::plugins::register_group_plugins(&mut registry, Arc::clone(&groups));
    for e in &extensions {
        e.register(&mut registry);
    }
    let mut profiles = ProfileRegistry::new(&loaded.profiles, &registry)?;
    // The extenders' filter, prioritize and preempt calls run on this runtime while a
    // thread of its blocking pool (or, for preemption and gangs, the scheduling thread)
    // waits for them; their bind calls run in the binding tasks. They are sent the API
    // objects the informers keep for them.
    let api_objects = crate::extender::objects::ApiObjects::for_extenders(&loaded.config.extenders);
    let extenders = crate::extender::build_extenders_with(
        &loaded.config.extenders,
        &tokio::runtime::Handle::current(),
        api_objects.as_ref(),
    )
    .map_err(Error::Config)?;
    profiles.set_extenders(&crate::extender::as_core(&extenders));
    let profiles = Arc::new(profiles);
    let cfg = &loaded.config;
    let clock: Arc<dyn Clock> = Arc::new(SystemClock::new());
    let queue = SchedulingQueue::new(
        queue_config(cfg),
        Arc::clone(&clock),
        Arc::clone(&profiles) as Arc<dyn QueueProfiles>,
    );
    for p in &explain.annotate_profiles {
        if profiles.for_scheduler_name(p).is_none() {
            return Err(Error::Config(format!(
                "--explain-annotations names profile {p:?}, which the config does not have"
            )));
        }
    }
    let mut shared = state::Shared::new(queue, clock, profiles, groups);
    shared.configz = crate::serving::configz::body(cfg);
    shared.flagz = crate::serving::componentz::flagz_body(&command_line);
    let shared = Arc::new(shared);
    shared.lock().explain = crate::serving::explain::ExplainStore::new(&explain);
    let mut alg = SchedulingAlgorithm::new(cfg.percentage_of_nodes_to_score.unwrap_or(0), seed);
    // Extension-point durations every cycle, plugin durations sampled: for /metrics.
    alg.set_record_metrics(true);
    alg.set_opportunistic_batching(opportunistic_batching);

    // Before any pod is scheduled: decides how pods with resource claims are refused.
    let dra = crate::client::discovery::serves_dra(&client).await;
    tracing::info!(
        served = dra,
        "discovery: {}",
        crate::client::discovery::DRA_GROUP_VERSION
    );
    shared.lock().cache.set_dra_api_served(dra);
    let taint_rules = if dra {
        crate::client::discovery::taint_rule_version(&client).await
    } else {
        None
    };
    tracing::info!(
        version = taint_rules.unwrap_or("none"),
        "discovery: resource.k8s.io DeviceTaintRules"
    );
    shared
        .lock()
        .cache
        .dra_mut()
        .set_binding_conditions(dra_device_binding_conditions);
    shared
        .lock()
        .cache
        .dra_mut()
        .set_workload_claims(dra_workload_resource_claims);
    shared
        .lock()
        .cache
        .dra_mut()
        .set_compatibility_groups(dra_device_compatibility_groups);
    // Before any pod is scheduled: a pod naming a group of an API the cluster lacks waits
    // and says why, and a gang is never scheduled without its group.
    let pod_groups = crate::client::discovery::pod_group_versions(&client).await;
    tracing::info!(
        workload = pod_groups.workload.unwrap_or("none"),
        coscheduling = pod_groups.coscheduling.unwrap_or("none"),
        "discovery: PodGroups"
    );
    // scheduler-plugins' PodGroup status is kept where a profile runs Coscheduling.
    let coscheduling_status = pod_groups.coscheduling.is_some()
        && loaded.profiles.iter().any(|p| {
            p.points
                .values()
                .flatten()
                .any(|n| n == scheduler_core::plugins::names::COSCHEDULING)
        });
    {
        let st = shared.lock();
        let mut g = st.groups.write();
        g.set_served(GroupApi::Workload, pod_groups.workload.is_some());
        g.set_served(GroupApi::Coscheduling, pod_groups.coscheduling.is_some());
        g.set_composite_enabled(composite_pod_groups);
        if coscheduling_status {
            g.track_status();
        }
    }
    let accept = informers::accept_header(&loaded.config.client_connection);
    let mut background = informers::spawn_all(
        &client,
        &accept,
        &shared,
        taint_rules,
        &pod_groups,
        api_objects.as_ref(),
    );
    for e in &mut extensions {
        background.extend(e.start(&client, QueueEvents::new(&shared)));
    }
    background.push(tokio::spawn(flush_periodically(
        Arc::clone(&shared),
        BACKOFF_FLUSH_PERIOD,
        SchedulingQueue::flush_backoff_completed,
    )));
    background.push(tokio::spawn(flush_periodically(
        Arc::clone(&shared),
        UNSCHEDULABLE_FLUSH_PERIOD,
        SchedulingQueue::flush_unschedulable_left_over,
    )));
    if let Some(listener) = health {
        background.push(tokio::spawn(health::serve(
            listener,
            health_tls,
            Arc::clone(&shared),
            health_auth,
            health_limits,
        )));
    }
    // Informers fill the cache while waiting for the lease, so a new leader starts warm.
    let mut elector = cfg
        .leader_election
        .leader_elect
        .then(|| leader::Elector::new(client.clone(), &cfg.leader_election, &instance_id));
    let mut led_since = None;
    if let Some(e) = &mut elector {
        shared
            .metrics
            .leading(&cfg.leader_election.resource_name, false);
        tokio::select! {
            sent = e.acquire(&shared.leader) => {
                led_since = Some(sent);
                shared.metrics.leading(&cfg.leader_election.resource_name, true);
            }
            _ = &mut shutdown => {
                for task in background {
                    task.abort();
                }
                return Ok(());
            }
        }
    }
    let api = retry::ApiClient::new(
        client,
        cfg.client_connection.qps,
        cfg.client_connection.burst,
    );
    let status_writer = coscheduling_status.then(|| {
        tokio::spawn(crate::coscheduling_status::run(
            Arc::clone(&shared),
            api.clone(),
        ))
    });
    let (tx, rx) = tokio::sync::mpsc::channel(crate::binding::executor::ACTIONS_QUEUED);
    let executor = Arc::new(Executor {
        client: api.clone(),
        recorder: event_recorder::Recorder::new(api, instance_id),
        shared: Arc::clone(&shared),
        bind_timeouts: volumes::bind_timeouts(cfg),
        status_order: Default::default(),
        closing: tokio::sync::watch::channel(false).0,
        extenders,
        scheduled_events: Default::default(),
    });
    // Extensions' reporters hold a sender, so they end before the executor.
    let leading: Vec<_> = extensions
        .iter_mut()
        .flat_map(|e| e.lead(FailureReporter::new(&shared, tx.clone())))
        .collect();
    let (fence, fenced) = tokio::sync::watch::channel(false);
    let executor = tokio::spawn(executor.run(rx, fenced));
    let sched = scheduler_loop::SchedulingLoop {
        shared: Arc::clone(&shared),
        alg,
        actions: tx,
        explain,
        record: scheduler_core::explain::Record::new(),
        pod_group_version: pod_groups.workload,
        waiting: scheduler_loop::Waiting::new(Some(tokio::runtime::Handle::current())),
    };
    let thread = std::thread::Builder::new()
        .name("scheduling-loop".into())
        .spawn(move || sched.run())
        .map_err(|e| Error::Thread(e.to_string()))?;
    tracing::info!(
        profiles = shared.profiles.len(),
        "ferrosched controller started"
    );

    let lost = async {
        match (&mut elector, led_since) {
            (Some(e), Some(since)) => e.hold(since, &shared.leader).await,
            _ => std::future::pending().await,
        }
    };
    let outcome = tokio::select! {
        _ = &mut shutdown => Ok(()),
        _ = lost => Err(Error::LeaderLost),
    };
    if let Some(t) = status_writer {
        t.abort();
    }
    if outcome.is_err() {
        // Another replica may take the lease from now on: send nothing more.
        let _ = fence.send(true);
        shared
            .metrics
            .leading(&cfg.leader_election.resource_name, false);
        tracing::error!("leadership lost: no new pods; in-flight API calls cancelled");
    } else {
        tracing::info!("shutting down: no new pods; finishing in-flight bindings");
    }
    shared.shutdown();
    let joined = tokio::task::spawn_blocking(move || thread.join())
        .await
        .map_err(|e| Error::Thread(e.to_string()))?;
    if joined.is_err() {
        return Err(Error::Thread("the scheduling loop panicked".into()));
    }
    for r in leading {
        r.abort();
        let _ = r.await;
    }
    // The loop dropped its sender: the executor drains and ends.
    let _ = executor.await;
    drop(fence);
    if outcome.is_ok()
        && let Some(e) = &mut elector
    {
        e.release().await;
        shared
            .metrics
            .leading(&cfg.leader_election.resource_name, false);
    }
    for task in background {
        task.abort();
    }
    outcome
}
