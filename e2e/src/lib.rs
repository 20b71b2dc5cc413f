//! The e2e harness: every scenario in `tests/` talks to its target only through the
//! Kubernetes API (a kube client), so the same code runs against the in-process fake API
//! server (the default, and CI) and against a real cluster (`FERROSCHED_E2E=cluster`).
//!
//! One [`Env`] per scenario: a fresh run id, a namespace, fake Nodes (kwok-like: capacity,
//! Ready, a taint only our pods tolerate), the scheduler in-process with profiles named after
//! the run, and a background "kubelet + provisioner" ([`kwok`]) doing what scheduling needs
//! from the nodes' side. Everything created carries [`RUN_LABEL`]`=<id>` and is deleted by
//! [`Env::finish`], or on a panic by [`Env`]'s `Drop`.
#![forbid(unsafe_code)]

use std::fmt::Display;
use std::future::Future;
use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::{
    Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod, PodCondition, ServiceAccount,
};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::node::v1::RuntimeClass;
use k8s_openapi::api::rbac::v1::ClusterRole;
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, ClusterResourceScope, NamespaceResourceScope};
use kube::{Client, Resource, ResourceExt};
use serde_json::{Value, json};

mod builders;
pub mod kwok;
mod policy;

pub use builders::{NodeBuilder, PodBuilder, merge, now};
pub use fake_apiserver::AdmissionPlugin;
pub use policy::refusal;

/// On everything a run creates; its value is the run id. Cleanup deletes by this label.
pub const RUN_LABEL: &str = "ferrosched.io/e2e-run";
/// On everything any run creates, so leftovers of a killed run are easy to find:
/// `kubectl delete nodes,namespaces,priorityclasses,runtimeclasses,storageclasses,persistentvolumes -l ferrosched.io/e2e`.
pub const E2E_LABEL: &str = "ferrosched.io/e2e";
/// Taint key on every fake node (value: the run id), tolerated only by this run's pods, so
/// no other scheduler's pods land on nodes without a kubelet.
pub const E2E_TAINT: &str = "ferrosched.io/e2e";
pub const ANN_SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
pub const ANN_BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";

/// How long [`Env::eventually`] waits. Generous for a real cluster; on the fake server every
/// scenario finishes within a few seconds.
pub const TIMEOUT: Duration = Duration::from_secs(30);

/// Where the scenarios run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// A `fake_apiserver::FakeApiServer` started in-process per scenario (the default).
    Fake,
    /// The cluster of `KUBECONFIG` (or in-cluster config). Only with `FERROSCHED_E2E=cluster`:
    /// a developer's KUBECONFIG must never get fake nodes from a plain `cargo test`.
    Cluster,
}

impl Target {
    /// From `FERROSCHED_E2E`. KUBECONFIG alone never selects the cluster.
    pub fn from_env() -> Target {
        Target::parse(std::env::var("FERROSCHED_E2E").ok().as_deref())
            .unwrap_or_else(|e| panic!("{e}"))
    }

    pub fn parse(value: Option<&str>) -> Result<Target, String> {
        match value {
            None | Some("" | "fake") => Ok(Target::Fake),
            Some("cluster") => Ok(Target::Cluster),
            Some(other) => Err(format!(
                "FERROSCHED_E2E={other:?}: expected \"fake\" (the default) or \"cluster\""
            )),
        }
    }
}

/// A short id unique enough per scenario run: names and label values stay short (DNS labels
/// of at most 63 characters) and two runs against one cluster never share objects.
pub fn run_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    // RandomState is seeded randomly per process; time, pid and a counter separate the rest.
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos(),
    );
    h.write_u32(std::process::id());
    h.write_u64(COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    format!("{:08x}", h.finish() as u32)
}

/// The scheduler running in-process, stopped through a oneshot.
struct Scheduler {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<controller::Result<()>>,
}

/// One scenario's world. Create with [`Env::new`], end with [`Env::finish`].
pub struct Env {
    pub client: Client,
    pub target: Target,
    /// The run id: in [`RUN_LABEL`], node names, profile names.
    pub id: String,
    /// The scenario's namespace.
    pub ns: String,
    /// The name of the StorageClass provisioner [`kwok`] plays.
    pub provisioner: String,
    config: kube::Config,
    scheduler: Option<Scheduler>,
    kwok: tokio::task::JoinHandle<()>,
    /// Served in-process for the scenario (the SchedulingPolicy webhook): aborted at the end.
    background: Vec<tokio::task::JoinHandle<()>>,
    finished: bool,
    // Dropped after `Drop::drop` ran, so its cleanup still reaches the fake server.
    fake: Option<std::sync::Arc<fake_apiserver::FakeApiServer>>,
}

impl Env {
    /// Connects to the target ([`Target::from_env`]), creates the scenario's namespace and
    /// starts [`kwok`]. `scenario` names the namespace (`e2e-{scenario}-{id}`).
    pub async fn new(scenario: &str) -> Env {
        Env::on(Target::from_env(), scenario).await
    }

    /// [`Env::new`] on a given target.
    pub async fn on(target: Target, scenario: &str) -> Env {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(
                tracing_subscriber::EnvFilter::try_from_default_env()
                    .unwrap_or_else(|_| "warn".into()),
            )
            .with_test_writer()
            .try_init();
        let id = run_id();
        let (config, fake) = match target {
            Target::Fake => {
                let server = fake_apiserver::FakeApiServer::start().await;
                let kc = kube::config::Kubeconfig::read_from(server.kubeconfig()).unwrap();
                let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
                    .await
                    .unwrap();
                (config, Some(std::sync::Arc::new(server)))
            }
            Target::Cluster => (
                kube::Config::infer()
                    .await
                    .expect("FERROSCHED_E2E=cluster needs KUBECONFIG or an in-cluster config"),
                None,
            ),
        };
        eprintln!(
            "e2e {scenario}: run {id} against {} ({})",
            match target {
                Target::Fake => "the in-process fake API server",
                Target::Cluster => "a real cluster (FERROSCHED_E2E=cluster)",
            },
            config.cluster_url
        );
        let client = Client::try_from(config.clone()).unwrap();
        let ns = format!("e2e-{}-{id}", scenario.replace('_', "-"));
        let provisioner = format!("e2e.ferrosched.io/{id}");
        let kwok = tokio::spawn(kwok::run(kwok::Kwok {
            client: client.clone(),
            target,
            id: id.clone(),
            ns: ns.clone(),
            provisioner: provisioner.clone(),
        }));
        let env = Env {
            client,
            target,
            id,
            ns,
            provisioner,
            config,
            scheduler: None,
            kwok,
            background: Vec::new(),
            finished: false,
            fake,
        };
        env.create_cluster::<Namespace>(json!({"metadata": {"name": env.ns}}))
            .await;
        if target == Target::Cluster {
            // ServiceAccount admission rejects pods until the namespace's "default" account
            // exists (the token controller creates it a moment after the namespace).
            let sa: Api<ServiceAccount> = Api::namespaced(env.client.clone(), &env.ns);
            let sa = &sa;
            env.eventually(
                "the namespace's default ServiceAccount",
                move || async move {
                    sa.get_opt("default")
                        .await
                        .ok()
                        .flatten()
                        .ok_or("not yet".to_string())
                },
            )
            .await;
        }
        env
    }

    /// The in-process server on the fake target: for the harness's own tests only
    /// (scenarios use the API, or they could not run on a cluster).
    pub fn fake_server(&self) -> Option<std::sync::Arc<fake_apiserver::FakeApiServer>> {
        self.fake.clone()
    }

    /// Whether the target serves `group_version` (e.g. `resource.k8s.io/v1`): a server
    /// without it answers discovery with 404.
    pub async fn serves(&self, group_version: &str) -> bool {
        match self.client.list_api_group_resources(group_version).await {
            Ok(list) => !list.resources.is_empty(),
            Err(kube::Error::Api(s)) if s.code == 404 => false,
            Err(e) => panic!("discovery of {group_version}: {e}"),
        }
    }

    /// Switches one of the API server's admission plugins off for this scenario: possible on
    /// the fake server (returns true), not through the API of a real one (returns false: the
    /// scenario should say so and stop).
    pub fn disable_admission_plugin(&self, plugin: AdmissionPlugin) -> bool {
        match &self.fake {
            Some(server) => {
                server.disable_admission_plugin(plugin);
                true
            }
            None => false,
        }
    }

    /// `labels` for everything this run creates.
    fn labels(&self) -> Value {
        json!({RUN_LABEL: self.id, E2E_LABEL: "true"})
    }

    pub fn selector(&self) -> String {
        format!("{RUN_LABEL}={}", self.id)
    }

    /// The full name of this run's profile `suffix`: unique, so nothing else in a real
    /// cluster is scheduled by it (and no other scheduler takes our pods).
    pub fn profile(&self, suffix: &str) -> String {
        format!("ferrosched-e2e-{}-{suffix}", self.id)
    }

    /// The full name of this run's cluster-scoped object `short` (nodes, classes).
    pub fn name(&self, short: &str) -> String {
        format!("e2e-{}-{short}", self.id)
    }

    /// Starts the scheduler with profiles `(suffix, extra YAML)`: the YAML is placed under
    /// the profile's list item (e.g. `"plugins:\n  score:\n ..."`).
    pub async fn start_scheduler(&mut self, profiles: &[(&str, &str)]) {
        self.start_scheduler_with(profiles, "").await;
    }

    /// [`Env::start_scheduler`] with `top_level` YAML added to the configuration (e.g.
    /// `"extenders:\n- urlPrefix: ..."`).
    pub async fn start_scheduler_with(&mut self, profiles: &[(&str, &str)], top_level: &str) {
        assert!(self.scheduler.is_none(), "scheduler already running");
        let mut config = String::from(
            "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection: {leaderElect: false}
podInitialBackoffSeconds: 1
podMaxBackoffSeconds: 2
",
        );
        config.push_str(top_level);
        config.push_str("profiles:\n");
        for (suffix, extra) in profiles {
            config.push_str(&format!("- schedulerName: {}\n", self.profile(suffix)));
            for line in extra.lines() {
                config.push_str(&format!("  {line}\n"));
            }
        }
        let loaded = scheduler_core::config::load_str(&config, "e2e.yaml")
            .unwrap_or_else(|e| panic!("e2e scheduler config: {e}\n{config}"));
        let (stop, rx) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(controller::run(controller::RunOptions {
            instance_id: format!("e2e-{}", self.id),
            ..controller::RunOptions::new(
                self.client.clone(),
                loaded,
                Box::pin(async move {
                    let _ = rx.await;
                }),
            )
        }));
        self.scheduler = Some(Scheduler { stop, task });
    }

    /// The scheduler with one default profile, `a`.
    pub async fn start_default_scheduler(&mut self) {
        self.start_scheduler(&[("a", "")]).await;
    }

    /// A kwok-like node named [`Env::name`]`(short)`: 4 CPUs, 8Gi, 110 pods, Ready, hostname
    /// and zone labels, the run's label and taint.
    pub fn node(&self, short: &str) -> NodeBuilder {
        let name = self.name(short);
        let mut labels = self.labels();
        merge(
            &mut labels,
            json!({"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                   "topology.kubernetes.io/zone": "zone-a", "type": "kwok"}),
        );
        NodeBuilder(json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": labels,
                         "annotations": {"kwok.x-k8s.io/node": "fake"}},
            "spec": {"taints": [{"key": E2E_TAINT, "value": self.id, "effect": "NoSchedule"}]},
            "status": {
                "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                "message": "kwok-like fake node (ferrosched e2e)",
                                "lastHeartbeatTime": now(), "lastTransitionTime": now()}],
                "nodeInfo": {"architecture": "amd64", "operatingSystem": "linux",
                             "kubeletVersion": "fake", "kubeProxyVersion": "fake",
                             "bootID": "", "containerRuntimeVersion": "", "kernelVersion": "",
                             "machineID": "", "osImage": "", "systemUUID": ""},
            },
        }))
    }

    /// Creates the node and sets its status (a real API server may drop status on create;
    /// kwok patches it too). Returns the node's name.
    pub async fn create_node(&self, node: NodeBuilder) -> String {
        let status = node.0["status"].clone();
        let created = self.create_cluster::<Node>(node.0).await;
        let name = created.metadata.name.unwrap();
        let api: Api<Node> = Api::all(self.client.clone());
        api.patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": status})),
        )
        .await
        .unwrap_or_else(|e| panic!("patching node {name}'s status: {e}"));
        // A real API server's TaintNodesByCondition admission adds
        // node.kubernetes.io/not-ready:NoSchedule to every new node; the node lifecycle
        // controller removes it once it sees Ready=True. Wait, so scenarios start from the
        // node as built (a no-op on the fake server).
        let (api, name_ref) = (&api, &name);
        self.eventually(
            format!("node {name} without condition taints"),
            move || async move {
                let node = api.get(name_ref).await.map_err(|e| e.to_string())?;
                let taints = node.spec.and_then(|s| s.taints).unwrap_or_default();
                match taints
                    .iter()
                    .find(|t| t.key.starts_with("node.kubernetes.io/"))
                {
                    Some(t) => Err(format!("{t:?}")),
                    None => Ok(()),
                }
            },
        )
        .await;
        name
    }

    /// A pod in the scenario's namespace for profile `a`, requesting 100m CPU and 64Mi,
    /// tolerating the run's taint and selecting the run's nodes only.
    pub fn pod(&self, name: &str) -> PodBuilder {
        PodBuilder(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": self.ns, "labels": self.labels()},
            "spec": {
                "schedulerName": self.profile("a"),
                "nodeSelector": {RUN_LABEL: self.id},
                "tolerations": [{"key": E2E_TAINT, "operator": "Equal", "value": self.id,
                                 "effect": "NoSchedule"}],
                "terminationGracePeriodSeconds": 0,
                "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                                "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}],
            },
        }))
    }

    pub async fn create_pod(&self, pod: PodBuilder) -> Pod {
        self.create::<Pod>(pod.0).await
    }

    /// Creates a namespaced object in the scenario's namespace, labelled.
    pub async fn create<K>(&self, mut object: Value) -> K
    where
        K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>
            + Clone
            + std::fmt::Debug
            + serde::de::DeserializeOwned
            + serde::Serialize,
    {
        merge(
            &mut object,
            json!({"metadata": {"namespace": self.ns, "labels": self.labels()}}),
        );
        let typed: K = serde_json::from_value(object.clone())
            .unwrap_or_else(|e| panic!("not a {}: {e}: {object}", K::kind(&())));
        let api: Api<K> = Api::namespaced(self.client.clone(), &self.ns);
        api.create(&PostParams::default(), &typed)
            .await
            .unwrap_or_else(|e| panic!("creating {} {object}: {e}", K::kind(&())))
    }

    /// Creates a cluster-scoped object, labelled (cleanup deletes it by that label).
    pub async fn create_cluster<K>(&self, mut object: Value) -> K
    where
        K: Resource<Scope = ClusterResourceScope, DynamicType = ()>
            + Clone
            + std::fmt::Debug
            + serde::de::DeserializeOwned
            + serde::Serialize,
    {
        merge(&mut object, json!({"metadata": {"labels": self.labels()}}));
        let typed: K = serde_json::from_value(object.clone())
            .unwrap_or_else(|e| panic!("not a {}: {e}: {object}", K::kind(&())));
        let api: Api<K> = Api::all(self.client.clone());
        api.create(&PostParams::default(), &typed)
            .await
            .unwrap_or_else(|e| panic!("creating {} {object}: {e}", K::kind(&())))
    }

    /// A PriorityClass [`Env::name`]`(short)` with `value`; returns its name.
    pub async fn create_priority_class(&self, short: &str, value: i32) -> String {
        let name = self.name(short);
        self.create_cluster::<PriorityClass>(json!({
            "metadata": {"name": name}, "value": value,
            "description": "ferrosched e2e",
        }))
        .await;
        name
    }

    /// A WaitForFirstConsumer StorageClass [`Env::name`]`(short)` whose provisioner is the
    /// harness's ([`kwok`]).
    pub async fn create_wffc_storage_class(&self, short: &str) -> String {
        let name = self.name(short);
        self.create_cluster::<StorageClass>(json!({
            "metadata": {"name": name},
            "provisioner": self.provisioner,
            "reclaimPolicy": "Retain",
            "volumeBindingMode": "WaitForFirstConsumer",
        }))
        .await;
        name
    }

    pub async fn pod_now(&self, name: &str) -> Pod {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &self.ns);
        api.get(name)
            .await
            .unwrap_or_else(|e| panic!("get pod {name}: {e}"))
    }

    pub async fn pod_opt(&self, name: &str) -> Option<Pod> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &self.ns);
        api.get_opt(name)
            .await
            .unwrap_or_else(|e| panic!("get pod {name}: {e}"))
    }

    pub async fn claim(&self, name: &str) -> PersistentVolumeClaim {
        let api: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), &self.ns);
        api.get(name)
            .await
            .unwrap_or_else(|e| panic!("get claim {name}: {e}"))
    }

    pub async fn volume(&self, name: &str) -> PersistentVolume {
        let api: Api<PersistentVolume> = Api::all(self.client.clone());
        api.get(name)
            .await
            .unwrap_or_else(|e| panic!("get volume {name}: {e}"))
    }

    /// Nodes not of this run that carry a NoSchedule/NoExecute taint (0 on the fake
    /// server). On a real cluster they count in "N node(s) had untolerated taint(s)":
    /// TaintToleration filters before NodeAffinity rejects them for the run's nodeSelector.
    pub async fn foreign_tainted_nodes(&self) -> usize {
        let nodes: Api<Node> = Api::all(self.client.clone());
        let list = nodes
            .list(&ListParams::default())
            .await
            .unwrap_or_else(|e| panic!("listing nodes: {e}"));
        list.items
            .iter()
            .filter(|n| n.labels().get(RUN_LABEL) != Some(&self.id))
            // Cordoned nodes fail NodeUnschedulable first ("were unschedulable").
            .filter(|n| {
                !n.spec
                    .as_ref()
                    .and_then(|s| s.unschedulable)
                    .unwrap_or(false)
            })
            .filter(|n| {
                n.spec
                    .as_ref()
                    .and_then(|s| s.taints.as_ref())
                    .is_some_and(|ts| {
                        ts.iter()
                            .any(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
                    })
            })
            .count()
    }

    /// Polls `f` (every 50 ms; 250 ms on a cluster) until it returns `Ok`, for at most
    /// [`TIMEOUT`]; panics with `what` and the last `Err` (the state seen) otherwise.
    pub async fn eventually<T, F, Fut>(&self, what: impl Display, mut f: F) -> T
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, String>>,
    {
        let period = match self.target {
            Target::Fake => Duration::from_millis(50),
            Target::Cluster => Duration::from_millis(250),
        };
        let deadline = Instant::now() + TIMEOUT;
        loop {
            match f().await {
                Ok(t) => return t,
                Err(last) if Instant::now() >= deadline => {
                    panic!("timed out after {TIMEOUT:?} waiting for {what}; last seen: {last}")
                }
                Err(_) => tokio::time::sleep(period).await,
            }
        }
    }

    /// Waits until the pod is bound; returns its node.
    pub async fn wait_bound(&self, pod: &str) -> String {
        self.eventually(format!("pod {pod} bound"), move || async move {
            let p = self.pod_now(pod).await;
            p.spec
                .as_ref()
                .and_then(|s| s.node_name.clone())
                .ok_or_else(|| format!("{:?}", p.status.and_then(|s| s.conditions)))
        })
        .await
    }

    /// The pod's PodScheduled condition, if any.
    pub async fn pod_scheduled(&self, pod: &str) -> Option<PodCondition> {
        self.pod_now(pod)
            .await
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .into_iter()
            .find(|c| c.type_ == "PodScheduled")
    }

    /// Waits for PodScheduled=False, reason Unschedulable, with a message `message` accepts
    /// (a retry rewrites the message: wait for the one the scenario is about).
    pub async fn wait_unschedulable(
        &self,
        pod: &str,
        message: impl Fn(&str) -> bool,
    ) -> PodCondition {
        let message = &message;
        self.eventually(format!("PodScheduled=False on {pod}"), move || async move {
            match self.pod_scheduled(pod).await {
                Some(c)
                    if c.status == "False"
                        && c.reason.as_deref() == Some("Unschedulable")
                        && message(c.message.as_deref().unwrap_or("")) =>
                {
                    Ok(c)
                }
                other => Err(format!("{other:?}")),
            }
        })
        .await
    }

    /// Every events.k8s.io/v1 Event about `pod` in the namespace, as JSON.
    pub async fn events_for(&self, pod: &str) -> Vec<Value> {
        let ar = ApiResource::erase::<Event>(&());
        let api: Api<DynamicObject> = Api::namespaced_with(self.client.clone(), &self.ns, &ar);
        api.list(&ListParams::default())
            .await
            .unwrap_or_else(|e| panic!("listing events: {e}"))
            .items
            .into_iter()
            .map(|e| serde_json::to_value(e).unwrap())
            .filter(|e| e["regarding"]["name"] == pod)
            .collect()
    }

    /// Waits for an event `reason` about `pod` whose note satisfies `note`; returns it.
    pub async fn wait_event(&self, pod: &str, reason: &str, note: impl Fn(&str) -> bool) -> Value {
        let note = &note;
        self.eventually(format!("{reason} event for {pod}"), move || async move {
            let events = self.events_for(pod).await;
            events
                .iter()
                .find(|e| e["reason"] == reason && note(e["note"].as_str().unwrap_or("")))
                .cloned()
                .ok_or_else(|| format!("{events:?}"))
        })
        .await
    }

    /// Stops the scheduler, which must exit cleanly. A scenario may start it again: it then
    /// begins from fresh lists, with no event of the pause left to race.
    pub async fn stop_scheduler(&mut self) {
        if let Some(s) = self.scheduler.take() {
            let _ = s.stop.send(());
            tokio::time::timeout(Duration::from_secs(15), s.task)
                .await
                .expect("the scheduler stops promptly")
                .expect("scheduler task")
                .expect("the scheduler exits cleanly");
        }
    }

    /// Stops the scheduler (it must exit cleanly) and deletes everything the run created.
    pub async fn finish(mut self) {
        self.stop_scheduler().await;
        self.kwok.abort();
        for t in self.background.drain(..) {
            t.abort();
        }
        cleanup(&self.client, &self.id, &self.ns).await;
        // Nodes have no finalizers: they must be gone now (namespaces and volumes on a real
        // cluster finish terminating in the background).
        let nodes: Api<Node> = Api::all(self.client.clone());
        let left = nodes
            .list(&ListParams::default().labels(&self.selector()))
            .await
            .map(|l| l.items.len())
            .unwrap_or(0);
        assert_eq!(left, 0, "cleanup left nodes of run {}", self.id);
        self.finished = true;
    }
}

impl Drop for Env {
    /// A scenario that panicked never reaches [`Env::finish`]: stop the scheduler and clean
    /// up here, from a thread with its own runtime and client (the test's runtime may be
    /// unwinding, or be a current-thread one this thread blocks). Bounded by a timeout so a
    /// failing test never hangs in cleanup.
    fn drop(&mut self) {
        self.kwok.abort();
        for t in self.background.drain(..) {
            t.abort();
        }
        if let Some(s) = self.scheduler.take() {
            s.task.abort();
        }
        if self.finished {
            return;
        }
        let (config, id, ns) = (self.config.clone(), self.id.clone(), self.ns.clone());
        eprintln!("e2e run {id} did not finish: cleaning up");
        let cleaner = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("cleanup runtime");
            rt.block_on(async {
                let client = match Client::try_from(config) {
                    Ok(c) => c,
                    Err(e) => return eprintln!("e2e cleanup of run {id}: no client: {e}"),
                };
                if tokio::time::timeout(TIMEOUT, cleanup(&client, &id, &ns))
                    .await
                    .is_err()
                {
                    eprintln!(
                        "e2e cleanup of run {id} timed out: see e2e/README.md to clean up by label"
                    );
                }
            });
        });
        // On a multi-thread runtime, hand this worker's queued tasks (the fake server's,
        // perhaps) to another thread while waiting.
        let multi_thread = tokio::runtime::Handle::try_current()
            .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
        if multi_thread {
            let _ = tokio::task::block_in_place(|| cleaner.join());
        } else {
            let _ = cleaner.join();
        }
    }
}

/// Deletes everything run `id` created: its namespace's pods (force: no kubelet will ever
/// confirm) and claims, the namespace, then every cluster-scoped object with its label.
/// Errors are reported, not fatal: cleanup runs on failure paths too.
pub async fn cleanup(client: &Client, id: &str, ns: &str) {
    let selector = format!("{RUN_LABEL}={id}");
    let force = DeleteParams {
        grace_period_seconds: Some(0),
        ..DeleteParams::default()
    };
    delete_labelled(
        &Api::<Pod>::namespaced(client.clone(), ns),
        &selector,
        &force,
    )
    .await;
    delete_labelled(
        &Api::<PersistentVolumeClaim>::namespaced(client.clone(), ns),
        &selector,
        &DeleteParams::default(),
    )
    .await;
    delete_labelled(
        &Api::<ResourceClaim>::namespaced(client.clone(), ns),
        &selector,
        &DeleteParams::default(),
    )
    .await;
    let dp = DeleteParams::default();
    delete_labelled(&Api::<Namespace>::all(client.clone()), &selector, &dp).await;
    delete_labelled(&Api::<Node>::all(client.clone()), &selector, &dp).await;
    delete_labelled(
        &Api::<PersistentVolume>::all(client.clone()),
        &selector,
        &dp,
    )
    .await;
    delete_labelled(&Api::<StorageClass>::all(client.clone()), &selector, &dp).await;
    delete_labelled(&Api::<PriorityClass>::all(client.clone()), &selector, &dp).await;
    delete_labelled(&Api::<RuntimeClass>::all(client.clone()), &selector, &dp).await;
    delete_labelled(
        &Api::<MutatingWebhookConfiguration>::all(client.clone()),
        &selector,
        &dp,
    )
    .await;
    delete_labelled(
        &Api::<ValidatingWebhookConfiguration>::all(client.clone()),
        &selector,
        &dp,
    )
    .await;
    delete_labelled(&Api::<ClusterRole>::all(client.clone()), &selector, &dp).await;
    let policies: Api<DynamicObject> =
        Api::all_with(client.clone(), &scheduling_policy::informer::api_resource());
    if let Ok(list) = policies
        .list(&ListParams::default().labels(&selector))
        .await
    {
        for p in list.items {
            let name = p.metadata.name.unwrap_or_default();
            if let Err(e) = policies.delete(&name, &dp).await {
                eprintln!("e2e cleanup: deleting SchedulingPolicy {name}: {e}");
            }
        }
    }
    delete_labelled(&Api::<ResourceSlice>::all(client.clone()), &selector, &dp).await;
    delete_labelled(&Api::<DeviceClass>::all(client.clone()), &selector, &dp).await;
}

/// Lists by label and deletes one by one (not every resource serves deletecollection).
async fn delete_labelled<K>(api: &Api<K>, selector: &str, dp: &DeleteParams)
where
    K: Resource<DynamicType = ()> + Clone + std::fmt::Debug + serde::de::DeserializeOwned,
{
    let kind = K::kind(&());
    let items = match api.list(&ListParams::default().labels(selector)).await {
        Ok(l) => l.items,
        // Not served (RBAC objects on the fake server; DRA before 1.34): nothing to delete.
        Err(kube::Error::Api(s)) if s.code == 404 => return,
        Err(e) => {
            eprintln!("e2e cleanup: listing {kind} {selector}: {e}");
            return;
        }
    };
    for item in items {
        let name = item.meta().name.clone().unwrap_or_default();
        match api.delete(&name, dp).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => eprintln!("e2e cleanup: deleting {kind} {name}: {e}"),
        }
    }
}
