//! Loads cluster objects from ordinary Kubernetes YAML or JSON: multi-document files,
//! `kubectl get -o yaml` List output, and directories of such files.

use std::fmt;
use std::path::{Path, PathBuf};

use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{
    Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod, ReplicationController, Service,
};
use k8s_openapi::api::node::v1::RuntimeClass;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::resource::v1 as dra;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::api::storage::v1::{
    CSIDriver, CSINode, CSIStorageCapacity, StorageClass, VolumeAttachment,
};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::types::composite_pod_group::CompositePodGroupInfo;
use crate::types::pod_group::{GroupApi, PodGroupInfo};

mod checks;

/// The DRA kinds' API version (GA in 1.34; the beta versions are not read).
const DRA: &[&str] = &["resource.k8s.io/v1"];

/// Every kind `simulate` reads (the kinds `run` watches), with the resource name `kubectl get`
/// takes for it.
pub const KINDS_READ: &[(&str, &str)] = &[
    ("Node", "nodes"),
    ("Pod", "pods"),
    ("Namespace", "namespaces"),
    ("Service", "services"),
    ("ReplicaSet", "replicasets"),
    ("StatefulSet", "statefulsets"),
    ("ReplicationController", "replicationcontrollers"),
    ("RuntimeClass", "runtimeclasses"),
    ("PriorityClass", "priorityclasses"),
    ("PodDisruptionBudget", "poddisruptionbudgets"),
    ("PersistentVolumeClaim", "persistentvolumeclaims"),
    ("PersistentVolume", "persistentvolumes"),
    ("StorageClass", "storageclasses"),
    ("CSINode", "csinodes"),
    ("CSIDriver", "csidrivers"),
    ("CSIStorageCapacity", "csistoragecapacities"),
    ("VolumeAttachment", "volumeattachments"),
    ("DeviceClass", "deviceclasses"),
    ("ResourceSlice", "resourceslices"),
    ("ResourceClaim", "resourceclaims"),
    ("ResourceClaimTemplate", "resourceclaimtemplates"),
    ("DeviceTaintRule", "devicetaintrules"),
    ("PodGroup", "podgroups"),
    ("CompositePodGroup", "compositepodgroups"),
];

/// PodGroup API versions read, and which API each belongs to (`types::pod_group`).
pub(crate) const POD_GROUP_VERSIONS: &[(&str, GroupApi)] = &[
    ("scheduling.k8s.io/v1beta1", GroupApi::Workload),
    ("scheduling.k8s.io/v1alpha2", GroupApi::Workload),
    ("scheduling.x-k8s.io/v1alpha1", GroupApi::Coscheduling),
];

/// The one command that dumps everything `simulate` reads (README, docs and
/// `simulate --help` show this very text; a test checks they agree).
pub const DUMP_COMMAND: &str = "kubectl get nodes,pods,namespaces,services,replicasets,statefulsets,replicationcontrollers,runtimeclasses,priorityclasses,poddisruptionbudgets,persistentvolumeclaims,persistentvolumes,storageclasses,csinodes,csidrivers,csistoragecapacities,volumeattachments,deviceclasses,resourceslices,resourceclaims,resourceclaimtemplates -A -o yaml > cluster.yaml";

/// PodGroups are dumped apart, like DeviceTaintRules: only clusters that turned the Workload
/// API on (1.36+) or installed scheduler-plugins' CRD serve them. Pass the file as another
/// `--cluster` path. (`kubectl get podgroups` picks one of the two APIs; name the other one
/// fully, `podgroups.scheduling.x-k8s.io`, when both are served.)
pub const POD_GROUPS_DUMP_COMMAND: &str = "kubectl get podgroups -A -o yaml > podgroups.yaml";

/// CompositePodGroups (1.37 alpha, `scheduling.k8s.io/v1alpha3`) are dumped apart too, on
/// clusters that serve them.
pub const COMPOSITE_POD_GROUPS_DUMP_COMMAND: &str =
    "kubectl get compositepodgroups -A -o yaml > compositepodgroups.yaml";

/// DeviceTaintRules are dumped apart: servers before 1.37 (or with DRADeviceTaintRules off)
/// do not serve them, and `kubectl get` fails as a whole on a kind the server lacks. Pass
/// the file as a second `--cluster` path.
pub const TAINT_RULES_DUMP_COMMAND: &str =
    "kubectl get devicetaintrules -o yaml > devicetaintrules.yaml";

/// Every object `simulate` understands, in file order.
#[derive(Clone, Debug, Default)]
pub struct ClusterObjects {
    pub nodes: Vec<Node>,
    pub pods: Vec<Pod>,
    pub runtime_classes: Vec<RuntimeClass>,
    pub priority_classes: Vec<PriorityClass>,
    pub pdbs: Vec<PodDisruptionBudget>,
    pub pvcs: Vec<PersistentVolumeClaim>,
    pub pvs: Vec<PersistentVolume>,
    pub storage_classes: Vec<StorageClass>,
    pub csi_nodes: Vec<CSINode>,
    pub csi_drivers: Vec<CSIDriver>,
    pub storage_capacities: Vec<CSIStorageCapacity>,
    pub volume_attachments: Vec<VolumeAttachment>,
    pub device_classes: Vec<dra::DeviceClass>,
    pub resource_slices: Vec<dra::ResourceSlice>,
    pub resource_claims: Vec<dra::ResourceClaim>,
    pub resource_claim_templates: Vec<dra::ResourceClaimTemplate>,
    pub device_taint_rules: Vec<dra::DeviceTaintRule>,
    /// PodGroups of either API, as views.
    pub pod_groups: Vec<PodGroupInfo>,
    /// CompositePodGroups (`scheduling.k8s.io/v1alpha3`), as views.
    pub composite_pod_groups: Vec<CompositePodGroupInfo>,
    pub namespaces: Vec<Namespace>,
    pub services: Vec<Service>,
    pub replica_sets: Vec<ReplicaSet>,
    pub stateful_sets: Vec<StatefulSet>,
    pub replication_controllers: Vec<ReplicationController>,
    /// Where each object was read (`Kind namespace/name` -> `file:line`), to name both places
    /// of an object that appears twice.
    pub origins: std::collections::BTreeMap<String, String>,
    /// Kinds that were present but play no part in scheduling, with their counts.
    pub skipped_kinds: std::collections::BTreeMap<String, usize>,
}

impl ClusterObjects {
    /// Adds `other`'s objects; an object already here is an error naming both places.
    pub fn merge(&mut self, other: ClusterObjects) -> Vec<LoadError> {
        let mut errors = Vec::new();
        for (key, place) in &other.origins {
            if let Some(first) = self.origins.get(key) {
                errors.push(duplicate(key, first, place));
            }
        }
        if errors.is_empty() {
            self.extend(other);
        }
        errors
    }

    pub fn extend(&mut self, other: ClusterObjects) {
        self.namespaces.extend(other.namespaces);
        self.services.extend(other.services);
        self.replica_sets.extend(other.replica_sets);
        self.stateful_sets.extend(other.stateful_sets);
        self.replication_controllers
            .extend(other.replication_controllers);
        self.origins.extend(other.origins);
        self.nodes.extend(other.nodes);
        self.pods.extend(other.pods);
        self.runtime_classes.extend(other.runtime_classes);
        self.priority_classes.extend(other.priority_classes);
        self.pdbs.extend(other.pdbs);
        self.pvcs.extend(other.pvcs);
        self.pvs.extend(other.pvs);
        self.storage_classes.extend(other.storage_classes);
        self.csi_nodes.extend(other.csi_nodes);
        self.csi_drivers.extend(other.csi_drivers);
        self.storage_capacities.extend(other.storage_capacities);
        self.volume_attachments.extend(other.volume_attachments);
        self.device_classes.extend(other.device_classes);
        self.resource_slices.extend(other.resource_slices);
        self.resource_claims.extend(other.resource_claims);
        self.resource_claim_templates
            .extend(other.resource_claim_templates);
        self.device_taint_rules.extend(other.device_taint_rules);
        self.pod_groups.extend(other.pod_groups);
        self.composite_pod_groups.extend(other.composite_pod_groups);
        for (k, n) in other.skipped_kinds {
            *self.skipped_kinds.entry(k).or_default() += n;
        }
    }
}

/// One problem in one input file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadError {
    pub source: String,
    pub line: Option<u32>,
    pub column: Option<u32>,
    pub message: String,
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.source)?;
        if let Some(l) = self.line {
            write!(f, ":{l}")?;
            if let Some(c) = self.column {
                write!(f, ":{c}")?;
            }
        }
        write!(f, ": {}", self.message)
    }
}

/// The errors of [`load_paths`] or [`load_str`] as one text: a count, then the first
/// [`crate::config::MAX_PRINTED`] (as config errors are capped), then how many more. A dump
/// with thousands of broken objects prints the first ones and a count, not megabytes.
pub fn describe_errors(errors: &[LoadError]) -> String {
    let n = errors.len();
    let mut out = format!(
        "{n} error{} in cluster files:",
        if n == 1 { "" } else { "s" }
    );
    for e in errors.iter().take(crate::config::MAX_PRINTED) {
        out.push_str(&format!("\n  {e}"));
    }
    if n > crate::config::MAX_PRINTED {
        out.push_str(&format!(
            "\n  ... and {} more errors (fix the ones above first)",
            n - crate::config::MAX_PRINTED
        ));
    }
    out
}

/// Loads files and directories (non-recursive: `*.yaml`, `*.yml`, `*.json`, sorted by name).
/// Collects every error instead of stopping at the first.
pub fn load_paths(paths: &[PathBuf]) -> Result<ClusterObjects, Vec<LoadError>> {
    let mut all = ClusterObjects::default();
    let mut errors = Vec::new();
    for path in paths {
        for file in expand(path, &mut errors) {
            match std::fs::read_to_string(&file) {
                Ok(text) => match load_str(&text, &file.display().to_string()) {
                    Ok(objs) => errors.extend(all.merge(objs)),
                    Err(e) => errors.extend(e),
                },
                Err(e) => errors.push(LoadError {
                    source: file.display().to_string(),
                    line: None,
                    column: None,
                    message: format!("cannot read: {e}"),
                }),
            }
        }
    }
    if errors.is_empty() {
        Ok(all)
    } else {
        Err(errors)
    }
}

fn expand(path: &Path, errors: &mut Vec<LoadError>) -> Vec<PathBuf> {
    if !path.is_dir() {
        return vec![path.to_path_buf()];
    }
    let mut files: Vec<PathBuf> = match std::fs::read_dir(path) {
        Ok(rd) => rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.is_file()
                    && matches!(
                        p.extension().and_then(|e| e.to_str()),
                        Some("yaml" | "yml" | "json")
                    )
            })
            .collect(),
        Err(e) => {
            errors.push(LoadError {
                source: path.display().to_string(),
                line: None,
                column: None,
                message: format!("cannot list directory: {e}"),
            });
            Vec::new()
        }
    };
    files.sort();
    files
}

/// Loads every document of one YAML/JSON text. `source` names it in errors.
pub fn load_str(text: &str, source: &str) -> Result<ClusterObjects, Vec<LoadError>> {
    // YAML 1.2 booleans (a node named `n` or a label value `no` stays a string) and the
    // YAML budget every reader shares: an alias bomb stops at a limit.
    let options = crate::yaml_budget::options(text);
    let docs: Vec<serde_saphyr::Spanned<Value>> =
        match serde_saphyr::from_str_multiple_with_options(text, options) {
            Ok(d) => d,
            Err(e) => {
                if let Some(r) = crate::yaml_budget::explain(&e) {
                    return Err(vec![LoadError {
                        source: source.to_string(),
                        line: r.line,
                        column: r.column,
                        message: format!("{}; {}", r.message, r.fix),
                    }]);
                }
                let loc = e.location();
                return Err(vec![LoadError {
                    source: source.to_string(),
                    line: loc.map(|l| l.line() as u32),
                    column: loc.map(|l| l.column() as u32),
                    message: format!("not valid YAML: {}", first_line(&e.to_string())),
                }]);
            }
        };
    let mut out = ClusterObjects::default();
    let mut errors = Vec::new();
    let line_starts = std::cell::OnceCell::new();
    for doc in docs {
        let line = Some(doc.referenced.line() as u32).filter(|l| *l > 0);
        let mut ctx = DocCtx {
            source,
            text,
            line_starts: &line_starts,
            line,
            errors: &mut errors,
        };
        ctx.add(doc.value, &mut out);
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors)
    }
}

struct DocCtx<'a> {
    source: &'a str,
    text: &'a str,
    /// The text's line starts, built at the first value that needs its line.
    line_starts: &'a std::cell::OnceCell<Vec<usize>>,
    line: Option<u32>,
    errors: &'a mut Vec<LoadError>,
}

impl DocCtx<'_> {
    fn err(&mut self, message: String) {
        self.errors.push(LoadError {
            source: self.source.to_string(),
            line: self.line,
            column: None,
            message,
        });
    }

    fn add(&mut self, v: Value, out: &mut ClusterObjects) {
        if v.is_null() {
            return;
        }
        let Some(kind) = v.get("kind").and_then(Value::as_str).map(str::to_string) else {
            self.err("document has no `kind`; expected a Kubernetes object such as Node or Pod, or a List".into());
            return;
        };
        if !kind.ends_with("List") && !self.admissible(&kind, &v, out) {
            return;
        }
        let api_version = v
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        match kind.as_str() {
            k if k.ends_with("List") => {
                let items = match v.get("items") {
                    Some(Value::Array(items)) => items.clone(),
                    Some(Value::Null) | None => Vec::new(),
                    Some(_) => {
                        self.err(format!("{kind}: `items` must be a list"));
                        return;
                    }
                };
                for item in items {
                    // kubectl omits kind/apiVersion on items of typed lists.
                    let item = match (item, kind.strip_suffix("List").filter(|k| !k.is_empty())) {
                        (Value::Object(mut m), Some(k)) if !m.contains_key("kind") => {
                            m.insert("kind".into(), Value::String(k.into()));
                            Value::Object(m)
                        }
                        (item, _) => item,
                    };
                    self.add(item, out);
                }
            }
            "Node" => self.typed(v, &kind, &api_version, &["v1"], &mut out.nodes),
            "Pod" => self.typed(v, &kind, &api_version, &["v1"], &mut out.pods),
            "Namespace" => self.typed(v, &kind, &api_version, &["v1"], &mut out.namespaces),
            "Service" => self.typed(v, &kind, &api_version, &["v1"], &mut out.services),
            "ReplicationController" => self.typed(
                v,
                &kind,
                &api_version,
                &["v1"],
                &mut out.replication_controllers,
            ),
            "ReplicaSet" => self.typed(v, &kind, &api_version, &["apps/v1"], &mut out.replica_sets),
            "StatefulSet" => {
                self.typed(v, &kind, &api_version, &["apps/v1"], &mut out.stateful_sets)
            }
            "RuntimeClass" => self.typed(
                v,
                &kind,
                &api_version,
                &["node.k8s.io/v1"],
                &mut out.runtime_classes,
            ),
            "PriorityClass" => self.typed(
                v,
                &kind,
                &api_version,
                &["scheduling.k8s.io/v1"],
                &mut out.priority_classes,
            ),
            "PodDisruptionBudget" => {
                self.typed(v, &kind, &api_version, &["policy/v1"], &mut out.pdbs)
            }
            "PersistentVolumeClaim" => self.typed(v, &kind, &api_version, &["v1"], &mut out.pvcs),
            "PersistentVolume" => self.typed(v, &kind, &api_version, &["v1"], &mut out.pvs),
            "StorageClass" => self.typed(
                v,
                &kind,
                &api_version,
                &["storage.k8s.io/v1"],
                &mut out.storage_classes,
            ),
            "CSINode" => self.typed(
                v,
                &kind,
                &api_version,
                &["storage.k8s.io/v1"],
                &mut out.csi_nodes,
            ),
            "CSIDriver" => self.typed(
                v,
                &kind,
                &api_version,
                &["storage.k8s.io/v1"],
                &mut out.csi_drivers,
            ),
            "CSIStorageCapacity" => self.typed(
                v,
                &kind,
                &api_version,
                &["storage.k8s.io/v1"],
                &mut out.storage_capacities,
            ),
            "VolumeAttachment" => self.typed(
                v,
                &kind,
                &api_version,
                &["storage.k8s.io/v1"],
                &mut out.volume_attachments,
            ),
            "DeviceClass" => self.typed(v, &kind, &api_version, DRA, &mut out.device_classes),
            "ResourceSlice" => self.typed(v, &kind, &api_version, DRA, &mut out.resource_slices),
            "ResourceClaim" => self.typed(v, &kind, &api_version, DRA, &mut out.resource_claims),
            "ResourceClaimTemplate" => self.typed(
                v,
                &kind,
                &api_version,
                DRA,
                &mut out.resource_claim_templates,
            ),
            "DeviceTaintRule" => {
                self.typed(v, &kind, &api_version, DRA, &mut out.device_taint_rules)
            }
            "PodGroup" => self.pod_group(&v, &api_version, &mut out.pod_groups),
            "CompositePodGroup" => {
                let name = object_name(&v);
                if api_version != "scheduling.k8s.io/v1alpha3" {
                    self.err(format!(
                        "CompositePodGroup {name}: apiVersion {api_version:?} is not supported; use scheduling.k8s.io/v1alpha3"
                    ));
                } else {
                    match CompositePodGroupInfo::from_json(&v) {
                        Ok(c) => out.composite_pod_groups.push(c),
                        Err(e) => self.err(format!("CompositePodGroup {name}: {e}")),
                    }
                }
            }
            other => *out.skipped_kinds.entry(other.to_string()).or_default() += 1,
        }
    }

    fn pod_group(&mut self, v: &Value, api_version: &str, into: &mut Vec<PodGroupInfo>) {
        let name = object_name(v);
        let Some((_, api)) = POD_GROUP_VERSIONS.iter().find(|(av, _)| *av == api_version) else {
            let versions: Vec<&str> = POD_GROUP_VERSIONS.iter().map(|(av, _)| *av).collect();
            self.err(format!(
                "PodGroup {name}: apiVersion {api_version:?} is not supported; use {}",
                versions.join(" or ")
            ));
            return;
        };
        match PodGroupInfo::from_json(*api, v) {
            Ok(g) => into.push(g),
            Err(e) => self.err(format!("PodGroup {name}: {e}")),
        }
    }

    /// Refuses what the API server would have refused: invalid quantities (at their own
    /// line) and a second copy of an object already read. Returns false to skip the object.
    fn admissible(&mut self, kind: &str, v: &Value, out: &mut ClusterObjects) -> bool {
        if !KINDS_READ.iter().any(|(k, _)| *k == kind) {
            return true;
        }
        let name = object_name(v);
        let bad = checks::bad_quantities(kind, v);
        for q in &bad {
            let starts = self
                .line_starts
                .get_or_init(|| checks::line_starts(self.text));
            let line = self
                .line
                .and_then(|l| checks::line_of(self.text, starts, l, &q.key, &q.value))
                .or(self.line);
            self.errors.push(LoadError {
                source: self.source.to_string(),
                line,
                column: None,
                message: format!(
                    "{kind} {name}: {}: Invalid value: {:?}: {}",
                    q.path, q.value, q.message
                ),
            });
        }
        if !bad.is_empty() {
            return false;
        }
        let key = format!("{kind} {name}");
        let here = match self.line {
            Some(l) => format!("{}:{l}", self.source),
            None => self.source.to_string(),
        };
        if let Some(first) = out.origins.get(&key) {
            let e = duplicate(&key, first, &here);
            self.errors.push(e);
            return false;
        }
        out.origins.insert(key, here);
        true
    }

    fn typed<T: DeserializeOwned>(
        &mut self,
        v: Value,
        kind: &str,
        api_version: &str,
        supported: &[&str],
        into: &mut Vec<T>,
    ) {
        let name = object_name(&v);
        if !api_version.is_empty() && !supported.contains(&api_version) {
            self.err(format!(
                "{kind} {name}: apiVersion {api_version:?} is not supported; use {}",
                supported.join(" or ")
            ));
            return;
        }
        match serde_path_to_error::deserialize::<_, T>(v) {
            Ok(obj) => into.push(obj),
            Err(e) => {
                let path = e.path().to_string();
                self.err(format!("{kind} {name}: field {path}: {}", e.into_inner()));
            }
        }
    }
}

/// One invalid quantity of a pod written in `text`: its line (when found at or after
/// `doc_line`), the field path from the pod's root, the value and upstream's message.
pub(crate) struct PodQuantityProblem {
    pub line: Option<u32>,
    pub path: String,
    pub value: String,
    pub message: String,
}

/// The invalid or negative quantities of `pod` (a Pod's JSON, e.g. a workload's pod
/// template made into one), as the API server would refuse them.
pub(crate) fn pod_quantity_problems(
    pod: &Value,
    text: &str,
    doc_line: Option<u32>,
) -> Vec<PodQuantityProblem> {
    let bad = checks::bad_quantities("Pod", pod);
    if bad.is_empty() {
        return Vec::new();
    }
    let starts = checks::line_starts(text);
    bad.into_iter()
        .map(|q| PodQuantityProblem {
            line: doc_line.and_then(|l| checks::line_of(text, &starts, l, &q.key, &q.value)),
            path: q.path,
            value: q.value,
            message: q.message,
        })
        .collect()
}

fn object_name(v: &Value) -> String {
    let meta = v.get("metadata");
    let name = meta
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .unwrap_or("<unnamed>");
    match meta
        .and_then(|m| m.get("namespace"))
        .and_then(Value::as_str)
    {
        Some(ns) => format!("{ns}/{name}"),
        None => name.to_string(),
    }
}

/// The same object read twice: both places, and what to do.
fn duplicate(key: &str, first: &str, second: &str) -> LoadError {
    let (source, line) = match second.rsplit_once(':') {
        Some((s, l)) if l.parse::<u32>().is_ok() => (s.to_string(), l.parse().ok()),
        _ => (second.to_string(), None),
    };
    LoadError {
        source,
        line,
        column: None,
        message: format!(
            "{key} appears twice: first at {first}; each object may be given once (overlapping dump files?)"
        ),
    }
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or(s)
}

#[cfg(test)]
mod tests;
