//! The pod template of `simulate --pod-template`: a Pod, or the pod template of a
//! Deployment, Job, ReplicaSet or StatefulSet, read from one file and checked as the API
//! server would check the pods made from it.

use std::fmt;
use std::path::Path;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use serde_json::{Map, Value, json};

use crate::simulate::load::{POD_GROUP_VERSIONS, pod_quantity_problems};
use crate::types::PodInfo;
use crate::types::pod_group::PodGroupInfo;

/// The kinds a template may be, with the apiVersion each is served at.
pub const TEMPLATE_KINDS: &[(&str, &str)] = &[
    ("Pod", "v1"),
    ("Deployment", "apps/v1"),
    ("Job", "batch/v1"),
    ("ReplicaSet", "apps/v1"),
    ("StatefulSet", "apps/v1"),
];

/// The pod every copy is made from, and the object it came from.
#[derive(Clone, Debug)]
pub struct PodTemplate {
    /// The file it was read from (for messages).
    pub source: String,
    /// The object's kind: Pod, Deployment, Job, ReplicaSet or StatefulSet.
    pub kind: String,
    /// The object's name; copies are named `<name>-<i>`.
    pub name: String,
    /// The object's namespace, or `default`.
    pub namespace: String,
    /// The pod: the object itself, or its `spec.template` with the object's namespace.
    pub pod: Pod,
    /// With a PodGroup in the same file: each copy is the whole gang (a PodGroup of its own
    /// and `minCount` pods naming it).
    pub gang: Option<PodGroupInfo>,
    /// A StatefulSet's `spec.volumeClaimTemplates`: each copy gets its own PVCs from them,
    /// named `<claim>-<pod>` as the StatefulSet controller names them.
    pub claim_templates: Vec<PersistentVolumeClaim>,
}

/// A template that cannot be used: the file, the field (as a path from the object's
/// root), what is wrong and how to fix it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TemplateError {
    pub source: String,
    pub line: Option<u32>,
    pub field: Option<String>,
    pub message: String,
    pub fix: String,
}

impl fmt::Display for TemplateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.source)?;
        if let Some(l) = self.line {
            write!(f, ":{l}")?;
        }
        write!(f, ": pod template")?;
        if let Some(field) = &self.field {
            write!(f, ": {field}")?;
        }
        write!(f, ": {}; {}", self.message, self.fix)
    }
}

impl std::error::Error for TemplateError {}

/// Reads the template in `path`.
pub fn load_template(path: &Path) -> Result<PodTemplate, TemplateError> {
    let source = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| TemplateError {
        source: source.clone(),
        line: None,
        field: None,
        message: format!("cannot read: {e}"),
        fix: "give the path of a YAML or JSON file holding one Pod, Deployment, Job, ReplicaSet or StatefulSet".into(),
    })?;
    read_template(&text, &source)
}

/// Reads a template from YAML or JSON `text`; `source` names it in errors.
pub fn read_template(text: &str, source: &str) -> Result<PodTemplate, TemplateError> {
    let err = |line: Option<u32>, field: Option<&str>, message: String, fix: &str| TemplateError {
        source: source.to_string(),
        line,
        field: field.map(str::to_string),
        message,
        fix: fix.to_string(),
    };
    let options = crate::yaml_budget::options(text);
    let docs: Vec<serde_saphyr::Spanned<Value>> =
        serde_saphyr::from_str_multiple_with_options(text, options).map_err(|e| {
            let loc = e.location();
            err(
                loc.map(|l| l.line() as u32),
                None,
                format!(
                    "not valid YAML: {}",
                    e.to_string().lines().next().unwrap_or_default()
                ),
                "fix the syntax at that line",
            )
        })?;
    let docs: Vec<_> = docs.into_iter().filter(|d| !d.value.is_null()).collect();
    let is_group = |d: &serde_saphyr::Spanned<Value>| {
        d.value.get("kind").and_then(Value::as_str) == Some("PodGroup")
    };
    let (groups, pods): (Vec<_>, Vec<_>) = docs.iter().partition(|d| is_group(d));
    let gang = match groups.as_slice() {
        [] => None,
        [g] => Some(read_pod_group(text, g, &err)?),
        [_, second, ..] => {
            return Err(err(
                Some(second.referenced.line() as u32).filter(|l| *l > 0),
                Some("kind"),
                format!("the file holds {} PodGroups", groups.len()),
                "give one PodGroup and the one pod template whose pods name it",
            ));
        }
    };
    let [doc] = pods.as_slice() else {
        if let Some((g, gline)) = &gang {
            return Err(err(
                *gline,
                None,
                format!(
                    "PodGroup {} comes with {} pod template(s)",
                    g.key.name,
                    pods.len()
                ),
                "add exactly one Pod, Deployment, Job, ReplicaSet or StatefulSet whose pods name the group in spec.schedulingGroup.podGroupName",
            ));
        }
        return Err(err(
            None,
            None,
            format!("the file holds {} objects", docs.len()),
            "give exactly one Pod, Deployment, Job, ReplicaSet or StatefulSet (and, to count gangs, one PodGroup)",
        ));
    };
    let line = Some(doc.referenced.line() as u32).filter(|l| *l > 0);
    let v = &doc.value;
    let kinds: Vec<&str> = TEMPLATE_KINDS.iter().map(|(k, _)| *k).collect();
    let kind = v.get("kind").and_then(Value::as_str).unwrap_or_default();
    let Some((_, api_version)) = TEMPLATE_KINDS.iter().find(|(k, _)| *k == kind) else {
        let what = if kind.is_empty() {
            "missing".to_string()
        } else {
            format!("{kind:?} is not a kind whose pods can be copied")
        };
        return Err(err(
            line_of_key(text, line, "kind").or(line),
            Some("kind"),
            what,
            &format!("use one of {}", kinds.join(", ")),
        ));
    };
    let given = v.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    if !given.is_empty() && given != *api_version {
        return Err(err(
            line_of_key(text, line, "apiVersion").or(line),
            Some("apiVersion"),
            format!("{given:?} is not served for {kind}"),
            &format!("use {api_version}"),
        ));
    }
    let meta = v.get("metadata").cloned().unwrap_or(Value::Null);
    let name = meta
        .get("name")
        .and_then(Value::as_str)
        .or_else(|| meta.get("generateName").and_then(Value::as_str))
        .map(|n| n.trim_end_matches('-').to_string())
        .filter(|n| !n.is_empty())
        .ok_or_else(|| {
            err(
                line,
                Some("metadata.name"),
                "missing".into(),
                "name the object: copies are named <name>-0, <name>-1, ...",
            )
        })?;
    let namespace = meta
        .get("namespace")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .unwrap_or("default")
        .to_string();

    // The pod as the API server would hold it, and where its fields are in the file.
    let (pod_value, prefix) = if kind == "Pod" {
        (v.clone(), "")
    } else {
        let Some(Value::Object(t)) = v.get("spec").and_then(|s| s.get("template")) else {
            return Err(err(
                line,
                Some("spec.template"),
                "missing".into(),
                &format!(
                    "a {kind}'s pods are made from spec.template (metadata and spec); `kubectl get {} NAME -o yaml` writes it",
                    kind.to_lowercase()
                ),
            ));
        };
        let mut pod_meta = match t.get("metadata") {
            Some(Value::Object(m)) => m.clone(),
            _ => Map::new(),
        };
        pod_meta.insert("name".into(), Value::String(name.clone()));
        pod_meta.insert("namespace".into(), Value::String(namespace.clone()));
        (
            json!({
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": pod_meta,
                "spec": t.get("spec").cloned().unwrap_or(Value::Null),
            }),
            "spec.template.",
        )
    };
    if let Some(q) = pod_quantity_problems(&pod_value, text, line)
        .into_iter()
        .next()
    {
        return Err(err(
            q.line.or(line),
            Some(&format!("{prefix}{}", q.path)),
            format!("Invalid value: {:?}: {}", q.value, q.message),
            "write a quantity such as 500m, 2, 512Mi or 1Gi",
        ));
    }
    let pod: Pod = serde_path_to_error::deserialize(pod_value).map_err(|e| {
        let path = e.path().to_string();
        err(
            line,
            Some(&format!("{prefix}{path}")),
            e.into_inner().to_string(),
            "write the field as the Pod API defines it (`kubectl explain pod.spec`)",
        )
    })?;
    let spec = pod.spec.as_ref();
    if spec.is_none_or(|s| s.containers.is_empty()) {
        return Err(err(
            line,
            Some(&format!("{prefix}spec.containers")),
            "Required value: a pod needs at least one container".into(),
            "add the containers the copies run, with their resources.requests",
        ));
    }
    if let Some(node) = spec.and_then(|s| s.node_name.as_deref()) {
        return Err(err(
            line,
            Some(&format!("{prefix}spec.nodeName")),
            format!("set to {node:?}: such pods bypass the scheduler"),
            "remove it; to pin copies use a nodeSelector on kubernetes.io/hostname",
        ));
    }
    let mut pod = pod;
    // The copies are new pods: nothing of the template's own status carries over.
    pod.status = None;
    pod.metadata.namespace = Some(namespace.clone());
    pod.metadata.name = Some(name.clone());
    if let Some(problem) = PodInfo::from_pod(&pod).problems.into_iter().next() {
        return Err(err(
            line,
            None,
            problem,
            "fix the pod template as the API server would require",
        ));
    }
    let named = pod
        .spec
        .as_ref()
        .and_then(|s| s.scheduling_group.as_ref())
        .and_then(|g| g.pod_group_name.clone());
    let field = format!("{prefix}spec.schedulingGroup.podGroupName");
    let gang = match (gang, named) {
        (None, _) => None,
        (Some((g, _)), named) if named.as_deref() != Some(g.key.name.as_str()) => {
            return Err(err(
                line_of_key_below(text, line, "podGroupName").or(line),
                Some(&field),
                match named {
                    Some(n) => format!(
                        "the pods name PodGroup {n:?}, not the file's PodGroup {:?}",
                        g.key.name
                    ),
                    None => format!(
                        "not set: the pods would not belong to the file's PodGroup {:?}",
                        g.key.name
                    ),
                },
                &format!(
                    "set {field} to {:?} so that each copy of the gang gets its pods",
                    g.key.name
                ),
            ));
        }
        (Some((g, gline)), _) if g.key.namespace != namespace => {
            return Err(err(
                gline,
                Some("metadata.namespace"),
                format!(
                    "PodGroup {}/{} is not in the pods' namespace {namespace}",
                    g.key.namespace, g.key.name
                ),
                "put the PodGroup and the pod template in the same namespace",
            ));
        }
        (Some((g, gline)), _) if !g.is_gang() => {
            return Err(err(
                gline,
                Some("spec.schedulingPolicy"),
                format!(
                    "PodGroup {} is not a gang: its pods are scheduled one by one",
                    g.key.name
                ),
                "give it schedulingPolicy.gang.minCount to count whole gangs, or drop the PodGroup and the pods' schedulingGroup to count pods",
            ));
        }
        (Some((g, _)), _) => Some(g),
    };
    let claim_templates = match v.pointer("/spec/volumeClaimTemplates") {
        Some(t) if kind == "StatefulSet" && !t.is_null() => {
            let field = |path: &str| format!("spec.volumeClaimTemplates{path}");
            let claims: Vec<PersistentVolumeClaim> =
                serde_path_to_error::deserialize(t.clone()).map_err(|e| {
                    let path = e.path().to_string();
                    let path = if path == "." { String::new() } else { path };
                    err(
                        line_of_key_below(text, line, "volumeClaimTemplates").or(line),
                        Some(&field(&path)),
                        e.into_inner().to_string(),
                        "write each entry as a PersistentVolumeClaim (`kubectl explain statefulset.spec.volumeClaimTemplates`)",
                    )
                })?;
            if let Some(i) = claims
                .iter()
                .position(|c| c.metadata.name.as_deref().is_none_or(str::is_empty))
            {
                return Err(err(
                    line_of_key_below(text, line, "volumeClaimTemplates").or(line),
                    Some(&field(&format!("[{i}].metadata.name"))),
                    "missing".into(),
                    "name the claim template as the volume the containers mount",
                ));
            }
            claims
        }
        _ => Vec::new(),
    };
    Ok(PodTemplate {
        source: source.to_string(),
        kind: kind.to_string(),
        name,
        namespace,
        pod,
        gang,
        claim_templates,
    })
}

/// Makes a [`TemplateError`] from a line, a field, what is wrong and the fix.
type ErrorAt<'a> = dyn Fn(Option<u32>, Option<&str>, String, &str) -> TemplateError + 'a;

/// The PodGroup of a gang template, read as the dump's PodGroups are, with its line.
fn read_pod_group(
    text: &str,
    doc: &serde_saphyr::Spanned<Value>,
    err: &ErrorAt<'_>,
) -> Result<(PodGroupInfo, Option<u32>), TemplateError> {
    let line = Some(doc.referenced.line() as u32).filter(|l| *l > 0);
    let v = &doc.value;
    let given = v.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let versions: Vec<&str> = POD_GROUP_VERSIONS.iter().map(|(av, _)| *av).collect();
    let Some((_, api)) = POD_GROUP_VERSIONS.iter().find(|(av, _)| *av == given) else {
        return Err(err(
            line_of_key(text, line, "apiVersion").or(line),
            Some("apiVersion"),
            format!("{given:?} is not a PodGroup version ferrosched reads"),
            &format!("use {}", versions.join(" or ")),
        ));
    };
    let mut v = v.clone();
    if v.pointer("/metadata/namespace").is_none()
        && let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut)
    {
        m.insert("namespace".into(), Value::String("default".into()));
    }
    let g = PodGroupInfo::from_json(*api, &v).map_err(|e| {
        err(
            line,
            None,
            format!("PodGroup: {e}"),
            "write the PodGroup as the API defines it (`kubectl explain podgroup.spec`)",
        )
    })?;
    if g.key.name.is_empty() {
        return Err(err(
            line,
            Some("metadata.name"),
            "missing: the PodGroup has no name".into(),
            "name it: copies are named <name>-0, <name>-1, ...",
        ));
    }
    Ok((g, line))
}

/// The line of the first `key:` (at any depth) inside the document starting at `from`.
fn line_of_key_below(text: &str, from: Option<u32>, key: &str) -> Option<u32> {
    let first = from?.saturating_sub(1) as usize;
    text.lines()
        .enumerate()
        .skip(first)
        .take_while(|(i, l)| *i == first || !l.starts_with("---"))
        .find(|(_, l)| l.contains(&format!("{key}:")))
        .map(|(i, _)| i as u32 + 1)
}

/// The line (1-based) of the top-level `key:` of the YAML document starting at `from`, to
/// point at the field rather than at its document (none in JSON or flow style).
fn line_of_key(text: &str, from: Option<u32>, key: &str) -> Option<u32> {
    let first = from?.saturating_sub(1) as usize;
    text.lines()
        .enumerate()
        .skip(first)
        .take_while(|(i, l)| *i == first || !l.starts_with("---"))
        .find(|(_, l)| {
            l.strip_prefix(key)
                .is_some_and(|rest| rest.trim_start().starts_with(':'))
        })
        .map(|(i, _)| i as u32 + 1)
}
