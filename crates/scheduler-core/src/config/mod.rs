//! Component config: `kubescheduler.config.k8s.io/v1` KubeSchedulerConfiguration.
//!
//! Loading runs: YAML text -> spanned tree ([`yaml_tree`], [`source`]) -> the document as
//! written (decode_v1 / legacy) -> upstream defaults -> validation, which also expands
//! multiPoint ([`expand`]). Every problem is collected and reported with file, line,
//! column, field path and fix; see docs/configuration.md for the rules.

mod args;
mod decode;
mod decode_args;
mod decode_v1;
mod defaults;
mod duration;
mod error;
mod expand;
mod k8s_schema;
mod legacy;
mod messages;
mod print;
mod source;
mod spans;
mod spec;
mod suggest;
mod types;
mod validation;
mod validation_args;
mod yaml_tree;

use std::path::Path;

pub use defaults::{
    DEFAULT_DRA_BINDING_TIMEOUT, DEFAULT_DRA_FILTER_TIMEOUT, DEFAULT_MULTI_POINT,
    DEFAULT_PERMIT_WAITING_TIME_SECONDS, DEFAULT_POD_GROUP_REJECT_PERCENTAGE, default_args_for,
    default_plugins, default_volume_binding_shape, merge_plugin_set, merge_plugins,
};
pub use duration::{format_go_duration, parse_go_duration};
pub use error::{ConfigError, ConfigErrors, ConfigWarning, MAX_PRINTED};
pub use expand::{ExpandedProfile, expand};
pub use print::{to_json, to_yaml};
pub use types::*;

/// Message texts, for tests and docs that quote them.
pub mod message {
    pub use super::messages::*;
}

use spans::Report;
use spec::{ArgsSpec, ConfigSpec, PluginConfigSpec, ProfileSpec};
use yaml_tree::{Node, Value};

/// A loaded, defaulted and validated configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Loaded {
    pub config: KubeSchedulerConfiguration,
    /// One per profile, in order: what each extension point runs.
    pub profiles: Vec<ExpandedProfile>,
    pub warnings: Vec<ConfigWarning>,
}

/// Source label used for configs built from command-line flags.
pub const FLAGS_SOURCE: &str = "command-line flags";
pub const FLAG_SCHEDULER_NAME: &str = "--scheduler-name";
pub const FLAG_HARD_POD_AFFINITY_SYMMETRIC_WEIGHT: &str = "--hard-pod-affinity-symmetric-weight";

pub fn load_file(path: &Path) -> Result<Loaded, ConfigErrors> {
    let source = path.display().to_string();
    match std::fs::read_to_string(path) {
        Ok(text) => load_str(&text, &source),
        Err(e) => Err(
            ConfigError::new(&source, None, "", format!("cannot read config file: {e}"))
                .with_fix("check the path given to --config and that the file is readable")
                .into(),
        ),
    }
}

/// Parses, decodes (converting the legacy form), defaults, validates and expands.
pub fn load_str(text: &str, source_name: &str) -> Result<Loaded, ConfigErrors> {
    let root = source::parse(text, source_name)?;
    let mut r = Report::new(source_name);
    let spec = match type_meta(&mut r, &root) {
        DocVersion::Legacy => legacy::decode_legacy(&mut r, &root),
        DocVersion::V1 => decode_v1::decode_config(&mut r, &root),
    };
    finish(r, spec)
}

/// The configuration kube-scheduler runs with when given no config file.
pub fn default_config() -> KubeSchedulerConfiguration {
    defaults::apply(&ConfigSpec::default())
}

/// Without a config file, the legacy flags bind to the single default profile (Multi
/// Scheduling Profiles KEP): `--scheduler-name` names it and
/// `--hard-pod-affinity-symmetric-weight` becomes its InterPodAffinity args.
pub fn from_flags(
    scheduler_name: Option<&str>,
    hard_pod_affinity_symmetric_weight: Option<i32>,
) -> Result<Loaded, ConfigErrors> {
    let mut r = Report::new(FLAGS_SOURCE);
    let mut profile = ProfileSpec {
        scheduler_name: scheduler_name.map(str::to_string),
        ..ProfileSpec::default()
    };
    r.spans
        .alias("profiles[0].schedulerName", FLAG_SCHEDULER_NAME);
    if let Some(w) = hard_pod_affinity_symmetric_weight {
        profile.plugin_config.push(PluginConfigSpec {
            index: 0,
            name: crate::plugins::names::INTER_POD_AFFINITY.to_string(),
            args: ArgsSpec::InterPodAffinity {
                hard_pod_affinity_weight: Some(w),
                ignore_preferred_terms_of_existing_pods: false,
            },
        });
        r.spans.alias(
            "profiles[0].pluginConfig[0].args.hardPodAffinityWeight",
            FLAG_HARD_POD_AFFINITY_SYMMETRIC_WEIGHT,
        );
    }
    let spec = ConfigSpec {
        profiles: vec![profile],
        ..ConfigSpec::default()
    };
    let result = finish(r, spec);
    result.map_err(|mut errs| {
        for e in &mut errs.0 {
            if e.path == FLAG_HARD_POD_AFFINITY_SYMMETRIC_WEIGHT && e.fix.is_none() {
                e.fix = Some(format!(
                    "pass {FLAG_HARD_POD_AFFINITY_SYMMETRIC_WEIGHT} a value from 0 to 100"
                ));
            }
        }
        errs
    })
}

fn finish(mut r: Report, spec: ConfigSpec) -> Result<Loaded, ConfigErrors> {
    let config = defaults::apply(&spec);
    let mut profiles = validation::validate(&mut r, &spec, &config);
    let ignored = types::extender_ignored_resources(&config.extenders);
    if !ignored.is_empty() {
        // Upstream's buildExtenders: the resources extenders manage with ignoredByScheduler
        // become NodeResourcesFit's ignoredResources (replacing the args' own list), so
        // Filter leaves them to the extender. The printed config keeps the args as written.
        for p in &mut profiles {
            if let Some(Some(PluginArgs::NodeResourcesFit(a))) = p
                .plugin_args
                .get_mut(crate::plugins::names::NODE_RESOURCES_FIT)
            {
                a.ignored_resources.clone_from(&ignored);
            }
        }
    }
    if r.errors.is_empty() {
        return Ok(Loaded {
            config,
            profiles,
            warnings: r.warnings,
        });
    }
    // Document order; problems without a position (e.g. from flags) keep their order last.
    let mut errors = r.errors;
    errors.sort_by_key(|e| e.pos().map_or((u32::MAX, u32::MAX), |p| (p.line, p.column)));
    Err(ConfigErrors(errors))
}

enum DocVersion {
    V1,
    Legacy,
}

/// Checks apiVersion and kind. Anything but the legacy version is decoded as v1 so the
/// rest of the document is still checked.
fn type_meta(r: &mut Report, root: &Node) -> DocVersion {
    let Value::Map(entries) = &root.value else {
        if !root.is_null() {
            r.error_at(root.pos, "", messages::NOT_A_MAPPING)
                .hint(messages::FIX_TYPE_META);
        } else {
            r.error_at(
                root.pos,
                "apiVersion",
                messages::required("apiVersion and kind are missing (the file is empty)"),
            )
            .hint(messages::FIX_TYPE_META);
        }
        return DocVersion::V1;
    };
    let find = |k: &str| entries.iter().find(|e| e.key == k).map(|e| &e.value);
    let mut version = DocVersion::V1;
    match find("apiVersion") {
        None => {
            r.error_at(root.pos, "apiVersion", messages::required(""))
                .hint(messages::FIX_TYPE_META);
        }
        Some(n) => {
            r.spans.record("apiVersion", n.pos);
            if let Some(v) = r.string(n, "apiVersion") {
                if v == LEGACY_API_VERSION {
                    version = DocVersion::Legacy;
                } else if v != API_VERSION {
                    r.error("apiVersion", messages::unsupported_api_version(&v))
                        .hint(messages::unsupported_api_version_fix(&v));
                }
            }
        }
    }
    match find("kind") {
        None => {
            r.error_at(root.pos, "kind", messages::required(""))
                .hint(format!("add `kind: {KIND}`"));
        }
        Some(n) => {
            r.spans.record("kind", n.pos);
            if let Some(k) = r.string(n, "kind")
                && k != KIND
            {
                r.error("kind", messages::unsupported_kind(&k))
                    .hint(format!("set `kind: {KIND}`"));
            }
        }
    }
    version
}
