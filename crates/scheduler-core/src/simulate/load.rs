//! Loads cluster objects from ordinary Kubernetes YAML or JSON: multi-document files,
//! `kubectl get -o yaml` List output, and directories of such files.

use std::fmt;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::node::v1::RuntimeClass;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::api::storage::v1::{
    CSIDriver, CSINode, CSIStorageCapacity, StorageClass, VolumeAttachment,
};
use serde::de::DeserializeOwned;
use serde_json::Value;

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
    /// Kinds that were present but play no part in scheduling, with their counts.
    pub skipped_kinds: std::collections::BTreeMap<String, usize>,
}

impl ClusterObjects {
    pub fn extend(&mut self, other: ClusterObjects) {
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

/// Loads files and directories (non-recursive: `*.yaml`, `*.yml`, `*.json`, sorted by name).
/// Collects every error instead of stopping at the first.
pub fn load_paths(paths: &[PathBuf]) -> Result<ClusterObjects, Vec<LoadError>> {
    let mut all = ClusterObjects::default();
    let mut errors = Vec::new();
    for path in paths {
        for file in expand(path, &mut errors) {
            match std::fs::read_to_string(&file) {
                Ok(text) => match load_str(&text, &file.display().to_string()) {
                    Ok(objs) => all.extend(objs),
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
    // YAML 1.2 booleans: a node named `n` or a label value `no` stays a string.
    let mut options = serde_saphyr::Options::default();
    options.strict_booleans = true;
    let docs: Vec<serde_saphyr::Spanned<Value>> =
        match serde_saphyr::from_str_multiple_with_options(text, options) {
            Ok(d) => d,
            Err(e) => {
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
    for doc in docs {
        let line = Some(doc.referenced.line() as u32).filter(|l| *l > 0);
        let mut ctx = DocCtx {
            source,
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
        let api_version = v
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        match kind.as_str() {
            "List"
            | "NodeList"
            | "PodList"
            | "RuntimeClassList"
            | "PriorityClassList"
            | "PodDisruptionBudgetList"
            | "PersistentVolumeClaimList"
            | "PersistentVolumeList"
            | "StorageClassList"
            | "CSINodeList"
            | "CSIDriverList"
            | "CSIStorageCapacityList"
            | "VolumeAttachmentList" => {
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
            other => *out.skipped_kinds.entry(other.to_string()).or_default() += 1,
        }
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

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multi_document_files_load_every_kind() {
        let text = r#"
apiVersion: v1
kind: Node
metadata: {name: n1, labels: {gpu: "true"}}
status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}
---
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: default}
spec:
  containers: [{name: c, image: nginx, resources: {requests: {cpu: 100m}}}]
---
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {name: kata}
handler: kata
scheduling: {nodeSelector: {sandbox: "true"}}
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 1000
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: pdb, namespace: default}
spec: {minAvailable: 1, selector: {matchLabels: {app: web}}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: ignored}
"#;
        let o = load_str(text, "dump.yaml").unwrap();
        assert_eq!(o.nodes.len(), 1);
        assert_eq!(o.nodes[0].metadata.name.as_deref(), Some("n1"));
        assert_eq!(o.pods.len(), 1);
        assert_eq!(o.runtime_classes[0].handler, "kata");
        assert_eq!(o.priority_classes[0].value, Some(1000));
        assert_eq!(o.pdbs.len(), 1);
        assert_eq!(o.skipped_kinds.get("Deployment"), Some(&1));
    }

    #[test]
    fn storage_objects_load_including_typed_lists() {
        let text = r#"
apiVersion: v1
kind: PersistentVolumeClaimList
items:
- metadata: {name: data, namespace: default}
  spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv1}
spec: {capacity: {storage: 1Gi}, accessModes: [ReadWriteOnce], hostPath: {path: /x}}
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: standard}
provisioner: pd.csi.storage.gke.io
---
apiVersion: storage.k8s.io/v1
kind: CSINode
metadata: {name: n1}
spec: {drivers: [{name: pd.csi.storage.gke.io, nodeID: n1, allocatable: {count: 15}}]}
---
apiVersion: storage.k8s.io/v1
kind: CSIDriver
metadata: {name: pd.csi.storage.gke.io}
spec: {storageCapacity: true}
---
apiVersion: storage.k8s.io/v1
kind: CSIStorageCapacityList
items:
- metadata: {name: cap-a, namespace: kube-system}
  storageClassName: standard
  nodeTopology: {matchLabels: {topology.kubernetes.io/zone: a}}
  capacity: 100Gi
  maximumVolumeSize: 10Gi
---
apiVersion: storage.k8s.io/v1
kind: VolumeAttachment
metadata: {name: va-1}
spec: {attacher: pd.csi.storage.gke.io, nodeName: n1, source: {persistentVolumeName: pv1}}
---
apiVersion: storage.k8s.io/v1beta1
kind: StorageClass
metadata: {name: old}
provisioner: x
"#;
        let err = load_str(text, "s.yaml").unwrap_err();
        assert_eq!(err.len(), 1);
        assert!(
            err[0].message.starts_with("StorageClass old: apiVersion"),
            "{}",
            err[0].message
        );
        let o = load_str(
            text.split("---\napiVersion: storage.k8s.io/v1beta1")
                .next()
                .unwrap(),
            "s.yaml",
        )
        .unwrap();
        assert_eq!(o.pvcs[0].metadata.name.as_deref(), Some("data"));
        assert_eq!(o.pvs.len(), 1);
        assert_eq!(o.storage_classes[0].provisioner, "pd.csi.storage.gke.io");
        assert_eq!(
            o.csi_nodes[0].spec.drivers[0]
                .allocatable
                .as_ref()
                .unwrap()
                .count,
            Some(15)
        );
        assert_eq!(o.csi_drivers[0].spec.storage_capacity, Some(true));
        assert_eq!(o.volume_attachments[0].spec.node_name, "n1");
        assert_eq!(o.storage_capacities[0].storage_class_name, "standard");
        assert_eq!(
            o.storage_capacities[0].maximum_volume_size,
            Some(k8s_openapi::apimachinery::pkg::api::resource::Quantity(
                "10Gi".into()
            ))
        );
    }

    #[test]
    fn kubectl_list_output_loads_items_without_kind() {
        let text = r#"
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Node
  metadata: {name: a}
- apiVersion: v1
  kind: Node
  metadata: {name: b}
"#;
        assert_eq!(load_str(text, "l.yaml").unwrap().nodes.len(), 2);
        let typed = "apiVersion: v1\nkind: NodeList\nitems:\n- metadata: {name: a}\n";
        assert_eq!(load_str(typed, "l.yaml").unwrap().nodes.len(), 1);
    }

    #[test]
    fn yaml_1_1_booleans_stay_strings() {
        let o = load_str(
            "apiVersion: v1\nkind: Node\nmetadata: {name: n, labels: {gpu: no}}\n",
            "n.yaml",
        )
        .unwrap();
        assert_eq!(o.nodes[0].metadata.name.as_deref(), Some("n"));
        assert_eq!(o.nodes[0].metadata.labels.as_ref().unwrap()["gpu"], "no");
    }

    #[test]
    fn json_documents_load() {
        let text = r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"j"}}"#;
        assert_eq!(
            load_str(text, "n.json").unwrap().nodes[0]
                .metadata
                .name
                .as_deref(),
            Some("j")
        );
    }

    #[test]
    fn bad_field_names_the_object_field_and_line() {
        let text = "apiVersion: v1\nkind: Node\nmetadata: {name: ok}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: bad, namespace: ns}\nspec:\n  containers:\n  - name: c\n    ports: [{containerPort: eighty}]\n";
        let errs = load_str(text, "pods.yaml").unwrap_err();
        assert_eq!(errs.len(), 1, "{errs:?}");
        let e = errs[0].to_string();
        assert!(e.starts_with("pods.yaml:5"), "{e}");
        assert!(
            e.contains("Pod ns/bad: field spec.containers[0].ports[0].containerPort"),
            "{e}"
        );
    }

    #[test]
    fn syntax_errors_have_line_and_column() {
        let errs = load_str("kind: Node\nmetadata: {name: [\n", "broken.yaml").unwrap_err();
        assert_eq!(errs.len(), 1);
        assert!(errs[0].line.is_some(), "{:?}", errs[0]);
        assert!(
            errs[0].to_string().starts_with("broken.yaml:"),
            "{}",
            errs[0]
        );
    }

    #[test]
    fn missing_kind_and_wrong_api_version_are_errors() {
        let errs = load_str("metadata: {name: x}\n---\napiVersion: node.k8s.io/v1beta1\nkind: RuntimeClass\nmetadata: {name: r}\nhandler: h\n", "x.yaml")
            .unwrap_err();
        assert_eq!(errs.len(), 2, "{errs:?}");
        assert!(errs[0].message.contains("no `kind`"));
        assert!(
            errs[1].message.contains("use node.k8s.io/v1"),
            "{}",
            errs[1]
        );
    }

    #[test]
    fn directories_load_sorted_yaml_and_json_files() {
        let dir = std::env::temp_dir().join(format!("ferrosched-load-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("b.yaml"),
            "apiVersion: v1\nkind: Node\nmetadata: {name: b}\n",
        )
        .unwrap();
        std::fs::write(
            dir.join("a.json"),
            r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"a"}}"#,
        )
        .unwrap();
        std::fs::write(dir.join("notes.txt"), "ignored").unwrap();
        let o = load_paths(std::slice::from_ref(&dir)).unwrap();
        let names: Vec<_> = o
            .nodes
            .iter()
            .map(|n| n.metadata.name.clone().unwrap())
            .collect();
        assert_eq!(names, vec!["a", "b"]);
        std::fs::remove_dir_all(&dir).unwrap();
        let errs = load_paths(&[dir.join("missing.yaml")]).unwrap_err();
        assert!(errs[0].message.starts_with("cannot read"));
    }
}
