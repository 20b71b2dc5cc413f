//! `ferrosched explain NAMESPACE/POD`: why a pod of a live cluster is pending, or why it
//! landed where it is. Read only: the kinds the scheduler watches are listed once (and the
//! scheduler's ConfigMap read when no --config is given), the pod runs through its
//! profile's cycle without binding, and the explanation is printed.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
use kube::{Client, Resource};
use scheduler_core::config;
use scheduler_core::explain;
use scheduler_core::simulate::{self, ClusterObjects};
use scheduler_core::types::composite_pod_group::CompositePodGroupInfo;
use scheduler_core::types::pod_group::{GroupApi, PodGroupInfo};
use serde::de::DeserializeOwned;

use super::output::Output;

#[derive(Args, Debug)]
pub struct ExplainArgs {
    /// The pod, as NAMESPACE/NAME.
    #[arg(value_name = "NAMESPACE/POD")]
    pod: String,
    /// kubeconfig to reach the cluster (default: $KUBECONFIG, ~/.kube/config, in-cluster).
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// KubeSchedulerConfiguration to explain with. Default: the one the running ferrosched
    /// uses, read from --config-map.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// The ConfigMap holding the running scheduler's config, as NAMESPACE/NAME:KEY.
    #[arg(
        long,
        value_name = "NAMESPACE/NAME:KEY",
        default_value = "kube-system/ferrosched-config:config.yaml"
    )]
    config_map: String,
    /// Output format.
    #[arg(long, short, value_enum, default_value_t = Output::Table)]
    output: Output,
    /// Scored and rejected nodes listed before the rest is summarised.
    #[arg(long, value_name = "N", default_value_t = explain::render::DEFAULT_MAX_ROWS)]
    explain_rows: usize,
    /// Seed for breaking score ties.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

pub fn run(args: &ExplainArgs) -> ExitCode {
    if !args.pod.contains('/') {
        eprintln!(
            "error: {:?}: name the pod as NAMESPACE/NAME, e.g. default/web-0",
            args.pod
        );
        return ExitCode::FAILURE;
    }
    let rt = match super::runtime(super::Threads::One) {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    let fetched = rt.block_on(fetch(args));
    let (objects, loaded) = match fetched {
        Ok(x) => x,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    for w in &loaded.warnings {
        eprintln!("{w}");
    }
    let explained = match simulate::explain_pod(&objects, &loaded, &args.pod, args.seed) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let Some(node) = &explained.bound_to {
        eprintln!(
            "note: {} is already bound to {node}; this explains a placement as of now, and the cluster may have changed since it was scheduled",
            args.pod
        );
    }
    if !explained.missing.is_empty() {
        eprintln!(
            "note: the pod refers to objects that do not exist: {}",
            explained.missing.join(", ")
        );
    }
    let e = &explained.explanation;
    match args.output.serialize(e) {
        Some(text) => print!("{text}"),
        None => print!("{}", explain::render::render(e, args.explain_rows)),
    }
    ExitCode::SUCCESS
}

/// Lists every kind the scheduler reads, and loads the config.
async fn fetch(args: &ExplainArgs) -> Result<(ClusterObjects, config::Loaded), String> {
    fetch_cluster(
        args.kubeconfig.as_deref(),
        args.config.as_deref(),
        &args.config_map,
    )
    .await
}

/// A live cluster as `simulate` reads a dump, read only (lists, and the scheduler's
/// ConfigMap when no config file is given): for `explain` and `simulate --kubeconfig`.
pub(super) async fn fetch_cluster(
    kubeconfig: Option<&std::path::Path>,
    config_file: Option<&std::path::Path>,
    config_map: &str,
) -> Result<(ClusterObjects, config::Loaded), String> {
    let client = controller::client(kubeconfig)
        .await
        .map_err(|e| e.to_string())?;
    let loaded = match config_file {
        Some(f) => config::load_file(f).map_err(|e| e.to_string())?,
        None => config_from_map(&client, config_map).await?,
    };
    let c = &client;
    let objects = ClusterObjects {
        nodes: list(c).await?,
        pods: list(c).await?,
        namespaces: list(c).await?,
        services: list(c).await?,
        replica_sets: list(c).await?,
        stateful_sets: list(c).await?,
        replication_controllers: list(c).await?,
        runtime_classes: list(c).await?,
        priority_classes: list(c).await?,
        pdbs: list(c).await?,
        pvcs: list(c).await?,
        pvs: list(c).await?,
        storage_classes: list(c).await?,
        csi_nodes: list(c).await?,
        csi_drivers: list(c).await?,
        storage_capacities: list(c).await?,
        volume_attachments: list(c).await?,
        // Clusters before 1.34 (or with DRA off) do not serve these: read as none.
        device_classes: list(c).await.unwrap_or_default(),
        resource_slices: list(c).await.unwrap_or_default(),
        resource_claims: list(c).await.unwrap_or_default(),
        resource_claim_templates: list(c).await.unwrap_or_default(),
        device_taint_rules: list(c).await.unwrap_or_default(),
        pod_groups: pod_groups(c).await,
        composite_pod_groups: composite_pod_groups(c).await,
        ..ClusterObjects::default()
    };
    Ok((objects, loaded))
}

/// The PodGroups of every API version the scheduler reads (none where not served), as
/// views: a pod of a gang is explained against its group.
async fn pod_groups(client: &Client) -> Vec<PodGroupInfo> {
    let mut out = Vec::new();
    let mut workload_read = false;
    for (group, version, api) in [
        ("scheduling.k8s.io", "v1beta1", GroupApi::Workload),
        ("scheduling.k8s.io", "v1alpha2", GroupApi::Workload),
        ("scheduling.x-k8s.io", "v1alpha1", GroupApi::Coscheduling),
    ] {
        // The Workload API's objects are the same in every served version: read the newest.
        if api == GroupApi::Workload && workload_read {
            continue;
        }
        let gvk = GroupVersionKind::gvk(group, version, "PodGroup");
        let resource = ApiResource::from_gvk_with_plural(&gvk, "podgroups");
        let Ok(list) = Api::<DynamicObject>::all_with(client.clone(), &resource)
            .list(&ListParams::default())
            .await
        else {
            continue;
        };
        workload_read |= api == GroupApi::Workload;
        out.extend(list.items.iter().filter_map(|o| {
            let v = serde_json::to_value(o).ok()?;
            let mut info = PodGroupInfo::from_json(api, &v).ok()?;
            // A list's items may carry no apiVersion: the version listed is theirs.
            if info.api_version.is_empty() {
                info.api_version = format!("{group}/{version}");
            }
            Some(info)
        }));
    }
    out
}

/// The CompositePodGroups (1.37 alpha; none where not served), as views.
async fn composite_pod_groups(client: &Client) -> Vec<CompositePodGroupInfo> {
    let gvk = GroupVersionKind::gvk("scheduling.k8s.io", "v1alpha3", "CompositePodGroup");
    let resource = ApiResource::from_gvk_with_plural(&gvk, "compositepodgroups");
    let Ok(list) = Api::<DynamicObject>::all_with(client.clone(), &resource)
        .list(&ListParams::default())
        .await
    else {
        return Vec::new();
    };
    list.items
        .iter()
        .filter_map(|o| CompositePodGroupInfo::from_json(&serde_json::to_value(o).ok()?).ok())
        .collect()
}

/// Every object of one kind, in all namespaces.
async fn list<K>(client: &Client) -> Result<Vec<K>, String>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
    K::DynamicType: Default,
{
    Api::<K>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .map_err(|e| format!("listing {}: {e}", K::plural(&K::DynamicType::default())))
}

/// The running scheduler's config, from its ConfigMap (NAMESPACE/NAME:KEY).
async fn config_from_map(client: &Client, spec: &str) -> Result<config::Loaded, String> {
    let bad = || format!("--config-map {spec:?}: expected NAMESPACE/NAME:KEY");
    let (ns_name, key) = spec.split_once(':').ok_or_else(bad)?;
    let (ns, name) = ns_name.split_once('/').ok_or_else(bad)?;
    if ns.is_empty() || name.is_empty() || key.is_empty() {
        return Err(bad());
    }
    let cm = match Api::<ConfigMap>::namespaced(client.clone(), ns)
        .get_opt(name)
        .await
    {
        Ok(Some(cm)) => cm,
        Ok(None) => {
            return Err(format!(
                "ConfigMap {ns}/{name} not found, so there is no key {key:?} to read the \
                 scheduler's config from: pass --config-map NAMESPACE/NAME:KEY naming the \
                 running scheduler's ConfigMap, or --config FILE"
            ));
        }
        Err(e) => {
            return Err(format!(
                "reading ConfigMap {ns}/{name} (or pass --config FILE): {e}"
            ));
        }
    };
    let data = cm.data.unwrap_or_default();
    let Some(text) = data.get(key) else {
        let keys: Vec<&str> = data.keys().map(String::as_str).collect();
        return Err(format!(
            "ConfigMap {ns}/{name} has no key {key:?} (its keys: {}): pass --config-map \
             {ns}/{name}:KEY with the key that holds the config, or --config FILE",
            if keys.is_empty() {
                "none".to_string()
            } else {
                keys.join(", ")
            }
        ));
    };
    config::load_str(text, &format!("ConfigMap {ns}/{name}, key {key}")).map_err(|e| e.to_string())
}
