//! The objects a bench run creates (namespace, fake nodes, pods, PodGroups,
//! PriorityClasses), named and labelled so only this run's scheduler uses them, and their
//! removal by that label. Must not watch or measure anything: that is `measure`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use controller::client::status_code;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{
    Namespace, Node, NodeCondition, Pod, ServiceAccount, Taint, Toleration,
};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
};
use kube::{Api, Client, Resource};
use scheduler_core::bench_workloads;
use scheduler_core::types::pod_group::{GroupPolicy, PodGroupInfo};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;

use super::{PHASE_LABEL, RUN_LABEL, TAINT_KEY};

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

    pub(super) fn labels(&self, extra: &[(&str, &str)]) -> BTreeMap<String, String> {
        let mut l: BTreeMap<String, String> = extra
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        l.insert(RUN_LABEL.into(), self.id.clone());
        l
    }

    pub(super) fn node_name(&self, i: usize) -> String {
        format!("ferrosched-bench-{}-node-{i}", self.id)
    }

    fn priority_class(&self, priority: i32) -> String {
        format!("{}-p{}", self.scheduler_name, priority.unsigned_abs())
    }
}

/// The scheduler's config: leader election off, client qps/burst 5000 as scheduler_perf,
/// the kubeconfig to reach the server (in the config, where kube-scheduler reads it too),
/// the run's profile name(s).
pub fn scheduler_config(run: &RunNames, workload: &str, kubeconfig: Option<&Path>) -> String {
    let kubeconfig = kubeconfig
        .map(|k| {
            format!(
                "  kubeconfig: {}\n",
                serde_json::to_string(&k.display().to_string()).expect("a string serializes")
            )
        })
        .unwrap_or_default();
    let mut text = format!(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nleaderElection:\n  leaderElect: false\nclientConnection:\n{kubeconfig}  qps: 5000\n  burst: 5000\nprofiles:\n- schedulerName: {}\n",
        run.scheduler_name
    );
    if workload.starts_with("IdenticalPods") {
        // No default spreading: pods are batchable (as the in-memory workload's config).
        text.push_str(
            "  pluginConfig:\n  - name: PodTopologySpread\n    args:\n      defaultingType: List\n",
        );
    }
    if workload == "MixedProfiles" {
        // The workload's second profile (see scheduler-core's workloads).
        text.push_str(&format!(
            "- schedulerName: {}-bin-packing\n  pluginConfig:\n  - name: NodeResourcesFit\n    args:\n      scoringStrategy:\n        type: MostAllocated\n",
            run.scheduler_name
        ));
    }
    text
}

/// Command-line flags the scheduler child gets for `workload`: batching off for
/// `IdenticalPodsWithoutBatching` (both schedulers know the gate). kube-scheduler also needs
/// its PodGroup gates on for the group workloads (`GenericWorkload`, and
/// `TopologyAwareWorkloadScheduling` for topology constraints, as upstream's cases turn
/// them on); ferrosched has no such gates: it always schedules PodGroups.
pub fn scheduler_flags(workload: &str, kube_scheduler: bool) -> Vec<String> {
    let mut gates: Vec<&str> = Vec::new();
    if workload == "IdenticalPodsWithoutBatching" {
        gates.push("OpportunisticBatching=false");
    }
    if kube_scheduler && bench_workloads::GROUP_WORKLOADS.contains(&workload) {
        gates.push("GenericWorkload=true");
        if workload == bench_workloads::TOPOLOGY_AWARE_SCHEDULING {
            gates.push("TopologyAwareWorkloadScheduling=true");
        }
    }
    if gates.is_empty() {
        return Vec::new();
    }
    vec![format!("--feature-gates={}", gates.join(","))]
}

/// The API group of the Workload API's PodGroups.
pub const POD_GROUP_API_GROUP: &str = "scheduling.k8s.io";
/// Its versions serving PodGroups, newest first (1.37's `v1beta1`, 1.36's `v1alpha2`), as
/// the scheduler looks for them.
pub const POD_GROUP_VERSIONS: [&str; 2] = ["v1beta1", "v1alpha2"];

/// The PodGroup resource of `version`, for a dynamic API.
pub fn pod_group_resource(version: &str) -> ApiResource {
    ApiResource {
        group: POD_GROUP_API_GROUP.into(),
        version: version.into(),
        api_version: format!("{POD_GROUP_API_GROUP}/{version}"),
        kind: "PodGroup".into(),
        plural: "podgroups".into(),
    }
}

/// The workload's PodGroup as an object of this run, in the served `version`: its name, the
/// run's namespace and label, and the spec upstream's templates write (policy, topology
/// constraint, priority; `disruptionMode` only when `all`, else the server's default).
pub fn bench_pod_group(run: &RunNames, group: &PodGroupInfo, version: &str) -> DynamicObject {
    let policy = match group.policy {
        GroupPolicy::Basic => json!({ "basic": {} }),
        GroupPolicy::Gang { min_count } => json!({ "gang": { "minCount": min_count } }),
    };
    let mut spec = json!({ "schedulingPolicy": policy });
    if let Some(key) = &group.topology_key {
        spec["schedulingConstraints"] = json!({ "topology": [{ "key": key }] });
    }
    if let Some(p) = group.priority {
        spec["priority"] = json!(p);
    }
    if group.disrupt_all {
        // v1beta1: a union; 1.36's v1alpha2: a string.
        spec["disruptionMode"] = if version == "v1alpha2" {
            json!("PodGroup")
        } else {
            json!({ "all": {} })
        };
    }
    let object = json!({
        "apiVersion": format!("{POD_GROUP_API_GROUP}/{version}"),
        "kind": "PodGroup",
        "metadata": {
            "name": group.key.name,
            "namespace": run.namespace,
            "labels": run.labels(&[]),
        },
        "spec": spec,
    });
    serde_json::from_value(object).expect("a PodGroup is a valid object")
}

/// The namespace's `default` ServiceAccount, which a real API server's ServiceAccount
/// admission requires before it accepts pods. kube-controller-manager creates it in a full
/// cluster; a bare control plane has none, so the run creates it. Already there (409) is
/// fine, and so is a server that does not serve ServiceAccounts at all (404: it cannot
/// require them either).
pub(super) async fn create_default_service_account(
    client: &Client,
    run: &RunNames,
) -> Result<(), kube::Error> {
    let api: Api<ServiceAccount> = Api::namespaced(client.clone(), &run.namespace);
    let sa = ServiceAccount {
        metadata: ObjectMeta {
            name: Some("default".into()),
            labels: Some(run.labels(&[])),
            ..Default::default()
        },
        ..Default::default()
    };
    match api.create(&PostParams::default(), &sa).await {
        Ok(_) => Ok(()),
        Err(e) if matches!(status_code(&e), Some(404 | 409)) => Ok(()),
        Err(e) => Err(e),
    }
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
            value: Some(value),
            description: Some("ferrosched bench run".into()),
            ..Default::default()
        })
        .collect()
}

/// Creates every object with at most `concurrency` requests in flight. An object that
/// already exists (a retried create that had succeeded) counts as created; other errors are
/// retried a few times (a real API server may refuse pods until the namespace's default
/// ServiceAccount exists).
pub(super) async fn create_all<K>(
    api: &Api<K>,
    objects: Vec<K>,
    concurrency: usize,
) -> Result<(), kube::Error>
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
pub(super) async fn restore_node_status(
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

/// Deletes everything a run created, by its label: pods (no grace period: no kubelet will
/// confirm), its PodGroups (of `pod_group_version`, when it made any), the namespace, nodes
/// and PriorityClasses. Returns the errors.
pub async fn cleanup(
    client: &Client,
    run: &RunNames,
    pod_group_version: Option<&str>,
) -> Vec<String> {
    let lp = ListParams::default().labels(&run.selector());
    let dp = DeleteParams::default().grace_period(0);
    let mut errors = Vec::new();
    let mut note = |what: &str, r: Result<(), kube::Error>| match r {
        Err(e) if status_code(&e) != Some(404) => errors.push(format!("{what}: {e}")),
        _ => {}
    };
    let pods: Api<Pod> = Api::namespaced(client.clone(), &run.namespace);
    note("pods", pods.delete_collection(&dp, &lp).await.map(|_| ()));
    if let Some(version) = pod_group_version {
        let groups: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), &run.namespace, &pod_group_resource(version));
        note(
            "podgroups",
            groups.delete_collection(&dp, &lp).await.map(|_| ()),
        );
    }
    let namespaces: Api<Namespace> = Api::all(client.clone());
    note(
        "namespace",
        namespaces
            .delete(&run.namespace, &DeleteParams::default())
            .await
            .map(|_| ()),
    );
    let nodes: Api<Node> = Api::all(client.clone());
    let first = nodes.delete_collection(&dp, &lp).await.map(|_| ());
    // Tens of thousands of nodes outlast a request's timeout (the server goes on deleting):
    // the next run must not start beside this run's nodes, so wait until none is left,
    // asking again while the server still answers.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(900);
    let mut last = first;
    loop {
        let left = nodes.list_metadata(&lp.clone().limit(1)).await;
        match left {
            Ok(l) if l.items.is_empty() => {
                last = Ok(());
                break;
            }
            _ if std::time::Instant::now() > deadline => break,
            _ => {}
        }
        tokio::time::sleep(std::time::Duration::from_secs(2)).await;
        if last.is_err() {
            last = nodes.delete_collection(&dp, &lp).await.map(|_| ());
        }
    }
    note("nodes", last);
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
        let w = bench_workloads::build("PreemptionBasic", 3, 0, 2).unwrap();
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
        let values: Vec<i32> = classes.iter().map(|c| c.value.unwrap_or(0)).collect();
        assert_eq!(values, vec![0, 1000]);
    }

    /// PodGroups as upstream's templates write them, in the run's namespace with its label;
    /// the scheduler's parser reads back what the workload meant.
    #[test]
    fn pod_groups_belong_to_the_run_and_keep_their_spec() {
        let run = RunNames::new("abc");
        let w = bench_workloads::build_group("TopologyAwareScheduling", 100, 0, 8, None).unwrap();
        let g = bench_pod_group(&run, &w.pod_groups[1], "v1beta1");
        assert_eq!(g.metadata.name.as_deref(), Some("group-1"));
        assert_eq!(
            g.metadata.namespace.as_deref(),
            Some("ferrosched-bench-abc")
        );
        assert_eq!(g.metadata.labels.as_ref().unwrap()[RUN_LABEL], "abc");
        let v = serde_json::to_value(&g).unwrap();
        assert_eq!(v["apiVersion"], "scheduling.k8s.io/v1beta1");
        assert_eq!(v["kind"], "PodGroup");
        assert_eq!(
            v["spec"],
            json!({"schedulingPolicy": {"gang": {"minCount": 4}},
                   "schedulingConstraints": {"topology": [{"key": "topology.kubernetes.io/rack"}]}})
        );
        let back =
            PodGroupInfo::from_json(scheduler_core::types::pod_group::GroupApi::Workload, &v)
                .unwrap();
        assert_eq!(
            (back.policy, back.topology_key, back.priority),
            (
                w.pod_groups[1].policy,
                w.pod_groups[1].topology_key.clone(),
                None
            )
        );

        let basic = bench_workloads::build_group("BasicScheduling", 1, 0, 3, None).unwrap();
        let v =
            serde_json::to_value(bench_pod_group(&run, &basic.pod_groups[0], "v1alpha2")).unwrap();
        assert_eq!(v["apiVersion"], "scheduling.k8s.io/v1alpha2");
        assert_eq!(v["spec"], json!({"schedulingPolicy": {"basic": {}}}));

        let preemption =
            bench_workloads::build_group("GangPreemptionPodGroups", 2, 0, 2, Some(2)).unwrap();
        let v = serde_json::to_value(bench_pod_group(&run, &preemption.pod_groups[0], "v1beta1"))
            .unwrap();
        assert_eq!(v["spec"]["priority"], 1000);
        let p = bench_pod(&run, "measured", &preemption.measured_pods[0]);
        let s = p.spec.unwrap();
        assert_eq!(
            s.scheduling_group.unwrap().pod_group_name.as_deref(),
            Some("high-group-0")
        );
        // The group carries the priority; the pod has none, so no PriorityClass is made.
        assert_eq!((s.priority, s.priority_class_name), (None, None));
    }

    #[test]
    fn generated_configs_are_valid() {
        let run = RunNames::new("abc");
        for w in [
            "SchedulingBasic",
            "MixedProfiles",
            "IdenticalPods",
            "IdenticalPodsWithoutBatching",
        ] {
            let loaded = scheduler_core::config::load_str(
                &scheduler_config(&run, w, Some(Path::new("/tmp/k 1"))),
                "<bench>",
            )
            .unwrap_or_else(|e| panic!("{w}: {e}"));
            assert!(!loaded.config.leader_election.leader_elect);
            assert_eq!(loaded.config.client_connection.qps, 5000.0);
            // kube-scheduler reads the kubeconfig from the config too; a path with a space
            // survives the YAML.
            assert_eq!(loaded.config.client_connection.kubeconfig, "/tmp/k 1");
        }
        // Identical pods are batchable only without the default spreading.
        let identical = scheduler_core::config::load_str(
            &scheduler_config(&run, "IdenticalPods", None),
            "<bench>",
        )
        .unwrap();
        let profiles = scheduler_core::framework::ProfileRegistry::new(
            &identical.profiles,
            &scheduler_core::framework::Registry::in_tree(),
        )
        .unwrap();
        let fw = profiles.iter().next().unwrap().1;
        let pod = scheduler_core::types::PodInfo::from_pod(&bench_workloads::identical_pod(0));
        assert!(fw.sign_pod(&pod).is_some(), "identical pods are batchable");
        for kube in [false, true] {
            assert_eq!(
                scheduler_flags("IdenticalPodsWithoutBatching", kube),
                ["--feature-gates=OpportunisticBatching=false"]
            );
            assert!(scheduler_flags("IdenticalPods", kube).is_empty());
        }
        // kube-scheduler schedules PodGroups only with its gates on; ferrosched always does.
        assert!(scheduler_flags("GangScheduling", false).is_empty());
        assert_eq!(
            scheduler_flags("GangScheduling", true),
            ["--feature-gates=GenericWorkload=true"]
        );
        assert_eq!(
            scheduler_flags("TopologyAwareScheduling", true),
            ["--feature-gates=GenericWorkload=true,TopologyAwareWorkloadScheduling=true"]
        );
        let mixed = bench_workloads::build("MixedProfiles", 1, 0, 2).unwrap();
        let p = bench_pod(&run, "measured", &mixed.measured_pods[1]);
        assert_eq!(
            p.spec.unwrap().scheduler_name.as_deref(),
            Some("ferrosched-bench-abc-bin-packing")
        );
    }
}
