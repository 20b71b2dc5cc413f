//! The defaulted config as v1 YAML: apiVersion/kind first, camelCase fields, Go duration
//! strings, and plugin args with their own apiVersion/kind.

use serde::Serialize;

use super::types::{API_VERSION, KIND, KubeSchedulerConfiguration};

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Document<'a> {
    api_version: &'static str,
    kind: &'static str,
    #[serde(flatten)]
    config: &'a KubeSchedulerConfiguration,
}

pub fn to_yaml(cfg: &KubeSchedulerConfiguration) -> String {
    let doc = Document {
        api_version: API_VERSION,
        kind: KIND,
        config: cfg,
    };
    // Every type here is plain data (strings, numbers, lists, maps), which the YAML
    // serializer always handles.
    serde_saphyr::to_string(&doc).expect("config types serialize to YAML")
}

/// The same document as [`to_yaml`], as JSON (`config print -o json`, `/configz`): read back
/// from the YAML, so the printer keeps owning the shape (field order, Go durations).
pub fn to_json(cfg: &KubeSchedulerConfiguration) -> serde_json::Value {
    serde_saphyr::from_str(&to_yaml(cfg)).expect("printed config reads back")
}
