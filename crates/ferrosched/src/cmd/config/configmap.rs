//! `config validate` given a ConfigMap (such as manifests/configmap.yaml): each data key
//! holding a KubeSchedulerConfiguration is validated, and positions point into the
//! ConfigMap's own file.

use scheduler_core::config::{ConfigError, ConfigWarning};
use serde_json::Value;

pub enum Found {
    /// Not a ConfigMap: validate the file as a config.
    NotAConfigMap,
    /// A ConfigMap without any scheduler config in it.
    Problem(String),
    Configs(Vec<Entry>),
}

/// One data key's embedded config.
pub struct Entry {
    /// How the verdict names it: `file (ConfigMap ns/name, key config.yaml)`.
    pub label: String,
    key: String,
    pub text: String,
    /// File line of the key when the value is a literal block (`|`): embedded line N is file
    /// line `offset + N`. Other styles do not map line for line.
    line_offset: Option<u32>,
    indent: u32,
}

impl Entry {
    fn place(&self, line: &mut Option<u32>, column: &mut Option<u32>, path: &mut String) {
        match self.line_offset {
            Some(off) => {
                *line = line.map(|l| l + off);
                *column = column.map(|c| c + self.indent);
            }
            None => {
                *line = None;
                *column = None;
            }
        }
        *path = if path.is_empty() {
            format!("data[{}]", self.key)
        } else {
            format!("data[{}].{path}", self.key)
        };
    }

    pub fn relocate(&self, e: &mut ConfigError) {
        self.place(&mut e.line, &mut e.column, &mut e.path);
    }

    pub fn relocate_warning(&self, w: &mut ConfigWarning) {
        self.place(&mut w.line, &mut w.column, &mut w.path);
    }
}

pub fn embedded_configs(text: &str, source: &str) -> Found {
    // YAML 1.2 booleans, as the API server reads them (a namespace `y` stays a string), and
    // the YAML budget every reader shares. A file over it is read as a config, whose loader
    // refuses it with its place and the fix.
    let options = scheduler_core::yaml_budget::options(text);
    let Ok(v) = serde_saphyr::from_str_with_options::<Value>(text, options) else {
        return Found::NotAConfigMap;
    };
    if v.get("kind").and_then(Value::as_str) != Some("ConfigMap") {
        return Found::NotAConfigMap;
    }
    let meta = v.get("metadata");
    let field = |f: &str| meta.and_then(|m| m.get(f)).and_then(Value::as_str);
    let name = format!(
        "{}/{}",
        field("namespace").unwrap_or("default"),
        field("name").unwrap_or("<unnamed>")
    );
    let data: Vec<(&String, &str)> = match v.get("data") {
        Some(Value::Object(m)) => m
            .iter()
            .filter_map(|(k, v)| v.as_str().map(|s| (k, s)))
            .collect(),
        _ => Vec::new(),
    };
    let configs: Vec<Entry> = data
        .iter()
        .filter(|(k, v)| {
            v.contains("KubeSchedulerConfiguration")
                || [".yaml", ".yml", ".json"].iter().any(|e| k.ends_with(e))
        })
        .map(|(k, v)| {
            let (line_offset, indent) = block_position(text, k);
            Entry {
                label: format!("{source} (ConfigMap {name}, key {k})"),
                key: k.to_string(),
                text: v.to_string(),
                line_offset,
                indent,
            }
        })
        .collect();
    if configs.is_empty() {
        let keys: Vec<&str> = data.iter().map(|(k, _)| k.as_str()).collect();
        return Found::Problem(format!(
            "{source}: ConfigMap {name} holds no KubeSchedulerConfiguration (data keys: {})\n  fix: put the config under a key such as `config.yaml`, or validate the config file itself",
            if keys.is_empty() {
                "none".to_string()
            } else {
                keys.join(", ")
            }
        ));
    }
    Found::Configs(configs)
}

/// Where `key: |` is written and how deep its block is indented.
fn block_position(text: &str, key: &str) -> (Option<u32>, u32) {
    let lines: Vec<&str> = text.lines().collect();
    for (i, l) in lines.iter().enumerate() {
        let t = l.trim_start();
        let rest = t
            .strip_prefix(key)
            .or_else(|| t.strip_prefix(&format!("\"{key}\"")))
            .or_else(|| t.strip_prefix(&format!("'{key}'")));
        let Some(rest) = rest.and_then(|r| r.strip_prefix(':')) else {
            continue;
        };
        if !rest.trim_start().starts_with('|') {
            return (None, 0);
        }
        let indent = lines[i + 1..]
            .iter()
            .find(|l| !l.trim().is_empty())
            .map_or(0, |l| (l.len() - l.trim_start().len()) as u32);
        return (Some(i as u32 + 1), indent);
    }
    (None, 0)
}
