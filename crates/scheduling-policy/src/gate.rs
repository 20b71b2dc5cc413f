//! The scheduler's side of SchedulingPolicy (defence in depth behind the webhook): feeds
//! scheduler-core's `SchedulingPolicy` PreEnqueue plugin when a profile enables it.
//!
//! PreEnqueue is synchronous, RBAC answers are not. So the plugin reads [`PolicyGate`], a
//! store of each service account's usable policy names. A service account not resolved yet
//! keeps its pods out (`RESOLVING`) and is queued for the [`resolve`] task, which asks
//! SubjectAccessReviews (cached) and then fires `EventResource::SchedulingPolicy`, which the
//! plugin registered for: the queue runs PreEnqueue again for the pods it holds back. A
//! policy change fires the same event and re-resolves every known service account, and
//! every `refresh` the rights are asked again (RoleBindings are not watched).
//!
//! Pods the policies keep out get a FailedScheduling event and PodScheduled=False with the
//! violations, once per distinct message (PreEnqueue runs on every requeue).
//!
//! [`GateExtension`] plugs all of this into the controller; it reaches the scheduler only
//! through the controller's `QueueEvents` and `FailureReporter`, never its state.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use controller::{Extension, FailureReporter, PodRef, QueueEvents};
use kube::Client;
use scheduler_core::framework::{
    ActionType, ClusterEvent, EventResource, Plugin, PluginPoints, PreEnqueuePlugin, Registry,
    Status,
};
use scheduler_core::plugin_points;
use scheduler_core::plugins::names::SCHEDULING_POLICY;
use scheduler_core::plugins::scheduling_policy::{
    RESOLVING, SchedulingPolicyPlugin, UsablePolicies,
};
use scheduler_core::types::{PodInfo, PodKey};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::authz::{
    self, Authorizer, CachedAuthorizer, SarAuthorizer, ServiceAccount, usable_policies,
};
use crate::informer::{self, Policies};

/// Starts the message of the FailedScheduling event of a pod the policies keep out.
pub const KEPT_OUT: &str =
    "pod violates the SchedulingPolicies its service account may use and is not scheduled";
/// How long after a failed SubjectAccessReview the service account is asked again.
const RETRY_AFTER: Duration = Duration::from_secs(2);
/// Pods reported as kept out are remembered to report each message once; past this many
/// the memory is cleared (pods deleted while kept out would otherwise stay forever).
const KEPT_OUT_LIMIT: usize = 10_000;
/// Notices waiting for the leader to report them; more are dropped (reported again on the
/// next change of message).
const NOTICE_BACKLOG: usize = 1024;

/// A pod kept out, to report.
pub struct KeptOut {
    pub pod: PodRef,
    pub key: PodKey,
    pub scheduler_name: String,
    pub message: String,
}

/// What the plugin reads and the resolver writes.
pub struct PolicyGate {
    pub policies: Arc<Policies>,
    /// `None`: asked, no answer yet.
    usable: Mutex<HashMap<ServiceAccount, Option<Vec<String>>>>,
    wanted: mpsc::UnboundedSender<ServiceAccount>,
    reported: Mutex<HashMap<PodKey, String>>,
    notices: mpsc::Sender<KeptOut>,
}

/// The receiving ends: service accounts to resolve, pods to report.
pub struct GateChannels {
    pub wanted: mpsc::UnboundedReceiver<ServiceAccount>,
    pub notices: mpsc::Receiver<KeptOut>,
}

impl PolicyGate {
    pub fn new(policies: Arc<Policies>) -> (Arc<Self>, GateChannels) {
        let (wanted_tx, wanted) = mpsc::unbounded_channel();
        let (notices_tx, notices) = mpsc::channel(NOTICE_BACKLOG);
        let gate = PolicyGate {
            policies,
            usable: Mutex::default(),
            wanted: wanted_tx,
            reported: Mutex::default(),
            notices: notices_tx,
        };
        (Arc::new(gate), GateChannels { wanted, notices })
    }

    fn usable_map(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<ServiceAccount, Option<Vec<String>>>> {
        self.usable.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Stores a resolution; true when it changed what the service account may use.
    pub fn set(&self, sa: ServiceAccount, names: Vec<String>) -> bool {
        self.usable_map().insert(sa, Some(names.clone())) != Some(Some(names))
    }

    /// Queues every known service account for resolution (after a policy change).
    pub fn request_all(&self) {
        let known: Vec<ServiceAccount> = self.usable_map().keys().cloned().collect();
        for sa in known {
            let _ = self.wanted.send(sa);
        }
    }

    /// Remembers what was reported for a pod; true when `message` is new for it.
    fn newly_kept_out(&self, key: &PodKey, message: Option<&str>) -> bool {
        let mut reported = self.reported.lock().unwrap_or_else(|e| e.into_inner());
        let Some(message) = message else {
            reported.remove(key);
            return false;
        };
        if reported.get(key).is_some_and(|m| m == message) {
            return false;
        }
        if reported.len() >= KEPT_OUT_LIMIT {
            reported.clear();
        }
        reported.insert(key.clone(), message.to_string());
        true
    }

    /// Notes the plugin's verdict on a pod; a new reason to keep it out is reported.
    fn observe(&self, pod: &PodInfo, status: &Status) {
        if status.is_success() {
            self.newly_kept_out(pod.key(), None);
            return;
        }
        let message = status.message();
        // Transient: the pod is let in or reported once its rights are known.
        if message == RESOLVING || !self.newly_kept_out(pod.key(), Some(&message)) {
            return;
        }
        let notice = KeptOut {
            pod: PodRef::of(pod),
            key: pod.key().clone(),
            scheduler_name: pod.scheduler_name.clone(),
            message: format!("{KEPT_OUT}: {message}"),
        };
        if self.notices.try_send(notice).is_err() {
            // Forget it so the next PreEnqueue run reports it again.
            self.newly_kept_out(pod.key(), None);
        }
    }
}

impl UsablePolicies for PolicyGate {
    fn usable_policies(&self, pod: &PodInfo) -> Option<Vec<String>> {
        if !self.policies.is_synced() {
            return None;
        }
        let sa = ServiceAccount::new(pod.namespace(), &pod.service_account_name);
        let mut usable = self.usable_map();
        match usable.get(&sa) {
            Some(names) => names.clone(),
            None => {
                usable.insert(sa.clone(), None);
                let _ = self.wanted.send(sa);
                None
            }
        }
    }
}

/// The SchedulingPolicy plugin over the gate, reporting the pods it keeps out.
pub struct GatePlugin {
    inner: SchedulingPolicyPlugin,
    gate: Arc<PolicyGate>,
}

impl GatePlugin {
    pub fn new(gate: Arc<PolicyGate>) -> Self {
        let usable: Arc<dyn UsablePolicies> = Arc::clone(&gate) as Arc<dyn UsablePolicies>;
        GatePlugin {
            inner: SchedulingPolicyPlugin::new(Arc::clone(&gate.policies.store), usable),
            gate,
        }
    }
}

impl Plugin for GatePlugin {
    fn name(&self) -> &'static str {
        SCHEDULING_POLICY
    }
    fn points(self: Arc<Self>) -> PluginPoints {
        plugin_points!(self => pre_enqueue)
    }
    fn events_to_register(&self) -> Vec<ClusterEvent> {
        self.inner.events_to_register()
    }
}

impl PreEnqueuePlugin for GatePlugin {
    fn pre_enqueue(&self, pod: &PodInfo) -> Status {
        let status = self.inner.pre_enqueue(pod);
        self.gate.observe(pod, &status);
        status
    }
}

/// Lets the queue run PreEnqueue again for the pods the plugin holds back.
pub fn fire(events: &QueueEvents) {
    events.fire(EventResource::SchedulingPolicy, ActionType::UPDATE);
}

/// Resolves the service accounts the plugin asks about (and all of them every `refresh`)
/// until the task is aborted.
pub async fn resolve(
    gate: Arc<PolicyGate>,
    authz: Arc<dyn Authorizer>,
    events: QueueEvents,
    mut wanted: mpsc::UnboundedReceiver<ServiceAccount>,
    refresh: Duration,
) {
    let mut tick = tokio::time::interval(refresh);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        let batch: Vec<ServiceAccount> = tokio::select! {
            sa = wanted.recv() => match sa {
                Some(sa) => vec![sa],
                None => return,
            },
            _ = tick.tick() => gate.usable_map().keys().cloned().collect(),
        };
        let mut changed = false;
        for sa in batch {
            let names = gate.policies.store.names();
            match usable_policies(authz.as_ref(), &sa, &names).await {
                Ok(usable) => changed |= gate.set(sa, usable),
                Err(e) => {
                    tracing::warn!(service_account = %sa, error = %e,
                        "cannot resolve usable SchedulingPolicies; retrying");
                    let again = gate.wanted.clone();
                    tokio::spawn(async move {
                        tokio::time::sleep(RETRY_AFTER).await;
                        let _ = again.send(sa);
                    });
                }
            }
        }
        if changed {
            fire(&events);
        }
    }
}

/// Turns kept-out notices into FailedScheduling events and PodScheduled=False (run only
/// while leading) until the task is aborted.
pub async fn report(mut notices: mpsc::Receiver<KeptOut>, reporter: FailureReporter) {
    while let Some(n) = notices.recv().await {
        if !reporter
            .unschedulable(n.pod, &n.key, n.scheduler_name, n.message)
            .await
        {
            return;
        }
    }
}

/// The gate as a controller [`Extension`]: registers the plugin, feeds it (the policy
/// watch and the SubjectAccessReview resolver) and, while leading, reports the pods it
/// keeps out.
pub struct GateExtension {
    gate: Arc<PolicyGate>,
    wanted: Option<mpsc::UnboundedReceiver<ServiceAccount>>,
    notices: Option<mpsc::Receiver<KeptOut>>,
}

impl GateExtension {
    pub fn new() -> Self {
        let (gate, channels) = PolicyGate::new(Arc::default());
        GateExtension {
            gate,
            wanted: Some(channels.wanted),
            notices: Some(channels.notices),
        }
    }
}

impl Default for GateExtension {
    fn default() -> Self {
        Self::new()
    }
}

impl Extension for GateExtension {
    fn register(&self, registry: &mut Registry) {
        let gate = Arc::clone(&self.gate);
        registry.register_shared(
            SCHEDULING_POLICY,
            Arc::new(move |_| Ok(Arc::new(GatePlugin::new(Arc::clone(&gate))) as Arc<dyn Plugin>)),
        );
    }

    fn start(&mut self, client: &Client, events: QueueEvents) -> Vec<JoinHandle<()>> {
        let Some(wanted) = self.wanted.take() else {
            return Vec::new();
        };
        let (g, ev) = (Arc::clone(&self.gate), events.clone());
        let watch = tokio::spawn(informer::watch(
            client.clone(),
            Arc::clone(&self.gate.policies),
            move || {
                g.request_all();
                fire(&ev);
            },
        ));
        let authz = CachedAuthorizer::new(
            SarAuthorizer::new(client.clone()),
            authz::DEFAULT_ALLOWED_TTL,
            authz::DEFAULT_DENIED_TTL,
        );
        let resolver = tokio::spawn(resolve(
            Arc::clone(&self.gate),
            Arc::new(authz),
            events,
            wanted,
            authz::DEFAULT_ALLOWED_TTL,
        ));
        vec![watch, resolver]
    }

    fn lead(&mut self, reporter: FailureReporter) -> Vec<JoinHandle<()>> {
        let Some(notices) = self.notices.take() else {
            return Vec::new();
        };
        vec![tokio::spawn(report(notices, reporter))]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use scheduler_core::framework::Code;
    use scheduler_core::policy;

    fn gate_with(policies: &str) -> (Arc<PolicyGate>, GateChannels) {
        let ps = Arc::new(Policies::default());
        ps.store.replace_all(policy::parse(policies).unwrap());
        ps.mark_synced();
        PolicyGate::new(ps)
    }

    fn pod(scheduler: Option<&str>) -> PodInfo {
        PodInfo::from_pod(&k8s_openapi::api::core::v1::Pod {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some("p".into()),
                namespace: Some("team".into()),
                ..Default::default()
            },
            spec: Some(k8s_openapi::api::core::v1::PodSpec {
                scheduler_name: scheduler.map(str::to_string),
                ..Default::default()
            }),
            ..Default::default()
        })
    }

    const RESTRICTED: &str = "apiVersion: scheduling.ferrosched.io/v1alpha1
kind: SchedulingPolicy
metadata: {name: restricted}
spec: {allowed: {schedulerNames: [default-scheduler]}}
";

    #[test]
    fn unknown_service_accounts_are_queued_once_and_keep_pods_out() {
        let (gate, mut ch) = gate_with(RESTRICTED);
        let plugin = GatePlugin::new(Arc::clone(&gate));
        let pod = pod(None);
        for _ in 0..2 {
            let s = plugin.pre_enqueue(&pod);
            assert_eq!(
                (s.code(), s.message()),
                (Code::UnschedulableAndUnresolvable, RESOLVING.to_string())
            );
        }
        assert_eq!(
            ch.wanted.try_recv().unwrap(),
            ServiceAccount::new("team", "default")
        );
        assert!(ch.wanted.try_recv().is_err());
        assert!(ch.notices.try_recv().is_err(), "resolving is not reported");

        assert!(gate.set(
            ServiceAccount::new("team", "default"),
            vec!["restricted".into()]
        ));
        assert!(!gate.set(
            ServiceAccount::new("team", "default"),
            vec!["restricted".into()]
        ));
        assert!(plugin.pre_enqueue(&pod).is_success());
    }

    #[test]
    fn violations_are_reported_once_per_message() {
        let (gate, mut ch) = gate_with(RESTRICTED);
        gate.set(
            ServiceAccount::new("team", "default"),
            vec!["restricted".into()],
        );
        let plugin = GatePlugin::new(Arc::clone(&gate));
        let pod = pod(Some("other"));
        for _ in 0..3 {
            assert!(!plugin.pre_enqueue(&pod).is_success());
        }
        let n = ch.notices.try_recv().unwrap();
        assert_eq!(
            n.message,
            format!(
                "{KEPT_OUT}: spec.schedulerName \"other\" is not allowed; allowed: [\"default-scheduler\"]"
            )
        );
        assert!(ch.notices.try_recv().is_err());
    }

    #[test]
    fn nothing_is_usable_before_the_policies_are_listed() {
        let (gate, mut ch) = PolicyGate::new(Arc::new(Policies::default()));
        let pod = pod(None);
        assert_eq!(gate.usable_policies(&pod), None);
        assert!(ch.wanted.try_recv().is_err(), "asked once the list is in");
    }
}
