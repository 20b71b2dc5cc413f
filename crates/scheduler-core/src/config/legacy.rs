//! The legacy single-profile form (`kubescheduler.config.k8s.io/v1alpha1`), converted into
//! one v1 profile as the Multi Scheduling Profiles KEP describes: schedulerName, plugins
//! and pluginConfig move into `profiles[0]`, and hardPodAffinitySymmetricWeight becomes an
//! extra InterPodAffinity pluginConfig entry (so explicit InterPodAffinity args plus the
//! weight is a duplicate, as it was upstream).

use crate::framework::ExtensionPoint;
use crate::plugins::names;

use super::decode::field;
use super::decode_v1::{
    decode_client_connection, decode_leader_election_with, decode_plugin_config, decode_plugin_set,
};
use super::messages as msg;
use super::spans::{Report, child};
use super::spec::{ArgsSpec, ConfigSpec, PluginConfigSpec, ProfileSpec};
use super::types::Plugins;
use super::yaml_tree::Node;

const LEGACY_FIELDS: &[&str] = &[
    "apiVersion",
    "kind",
    "schedulerName",
    "algorithmSource",
    "hardPodAffinitySymmetricWeight",
    "leaderElection",
    "clientConnection",
    "healthzBindAddress",
    "metricsBindAddress",
    "enableProfiling",
    "enableContentionProfiling",
    "disablePreemption",
    "percentageOfNodesToScore",
    "bindTimeoutSeconds",
    "podInitialBackoffSeconds",
    "podMaxBackoffSeconds",
    "plugins",
    "pluginConfig",
];

const LEGACY_LEADER_ELECTION_FIELDS: &[&str] = &[
    "leaderElect",
    "leaseDuration",
    "renewDeadline",
    "retryPeriod",
    "resourceLock",
    "resourceName",
    "resourceNamespace",
    "lockObjectName",
    "lockObjectNamespace",
];

/// v1alpha1's points. Its `postFilter` is today's `preScore`; `unreserve` was folded
/// into `reserve`.
const LEGACY_PLUGIN_FIELDS: &[&str] = &[
    "queueSort",
    "preFilter",
    "filter",
    "postFilter",
    "score",
    "reserve",
    "permit",
    "preBind",
    "bind",
    "postBind",
    "unreserve",
];

const PROFILE: &str = "profiles[0]";

pub(crate) fn decode_legacy(r: &mut Report, root: &Node) -> ConfigSpec {
    let mut spec = ConfigSpec::default();
    let Some(top) = r.object(root, "", LEGACY_FIELDS) else {
        return spec;
    };
    // Paths of the converted profile display as the top-level fields they came from.
    r.spans.alias(PROFILE, "");
    let mut converted: Vec<String> = Vec::new();
    let mut profile = ProfileSpec::default();

    if let Some(n) = top.get("algorithmSource") {
        algorithm_source(r, n);
    }
    if let Some(n) = top.get("leaderElection")
        && let Some((mut le, o)) =
            decode_leader_election_with(r, n, "leaderElection", LEGACY_LEADER_ELECTION_FIELDS)
    {
        let old_ns = field!(r, o, "lockObjectNamespace", string).unwrap_or_default();
        let old_name = field!(r, o, "lockObjectName", string).unwrap_or_default();
        merge_lock_field(
            r,
            &mut le.resource_namespace,
            &old_ns,
            "resourceNamespace",
            "lockObjectNamespace",
            &mut converted,
        );
        merge_lock_field(
            r,
            &mut le.resource_name,
            &old_name,
            "resourceName",
            "lockObjectName",
            &mut converted,
        );
        spec.leader_election = le;
    }
    if let Some(n) = top.get("clientConnection") {
        spec.client_connection = decode_client_connection(r, n, "clientConnection");
    }
    for key in ["healthzBindAddress", "metricsBindAddress"] {
        if let Some(n) = top.get(key) {
            r.string(n, key);
            r.warn(key, msg::legacy_ignored_field(key))
                .hint("serving addresses are command-line flags; delete the field");
        }
    }
    spec.enable_profiling = field!(r, top, "enableProfiling", boolean);
    spec.enable_contention_profiling = field!(r, top, "enableContentionProfiling", boolean);
    spec.percentage_of_nodes_to_score = field!(r, top, "percentageOfNodesToScore", int32);
    spec.pod_initial_backoff_seconds = field!(r, top, "podInitialBackoffSeconds", int64);
    spec.pod_max_backoff_seconds = field!(r, top, "podMaxBackoffSeconds", int64);

    if let Some(n) = top.get("schedulerName") {
        let p = child(PROFILE, "schedulerName");
        r.spans.record(&p, n.pos);
        profile.scheduler_name = r.string(n, &p);
        converted.push("schedulerName -> profiles[0].schedulerName".into());
    }
    if let Some(n) = top.get("plugins") {
        profile.plugins = legacy_plugins(r, n);
        converted.push("plugins -> profiles[0].plugins".into());
    }
    if let Some(n) = top.get("pluginConfig") {
        let p = child(PROFILE, "pluginConfig");
        r.spans.record(&p, n.pos);
        profile.plugin_config = decode_plugin_config(r, n, &p, true);
        converted.push("pluginConfig -> profiles[0].pluginConfig".into());
    }
    // Synthesized entries go after every entry of the file's list, kept or dropped, so
    // their paths never alias a real entry.
    let file_entries = match top.get("pluginConfig").map(|n| &n.value) {
        Some(super::yaml_tree::Value::Seq(items)) => items.len(),
        _ => 0,
    };
    let next_index = |p: &ProfileSpec| {
        p.plugin_config
            .iter()
            .map(|c| c.index + 1)
            .max()
            .unwrap_or(0)
            .max(file_entries)
    };
    if let Some(n) = top.get("hardPodAffinitySymmetricWeight")
        && let Some(w) = r.int32(n, "hardPodAffinitySymmetricWeight")
    {
        let i = next_index(&profile);
        synthesized_arg(
            r,
            n,
            i,
            "hardPodAffinityWeight",
            "hardPodAffinitySymmetricWeight",
        );
        profile.plugin_config.push(PluginConfigSpec {
            index: i,
            name: names::INTER_POD_AFFINITY.to_string(),
            args: ArgsSpec::InterPodAffinity {
                hard_pod_affinity_weight: Some(w),
                ignore_preferred_terms_of_existing_pods: false,
            },
        });
        converted.push(
            "hardPodAffinitySymmetricWeight -> InterPodAffinity args hardPodAffinityWeight".into(),
        );
    }
    if let Some(n) = top.get("bindTimeoutSeconds")
        && let Some(s) = r.int64(n, "bindTimeoutSeconds")
    {
        let i = next_index(&profile);
        synthesized_arg(r, n, i, "bindTimeoutSeconds", "bindTimeoutSeconds");
        profile.plugin_config.push(PluginConfigSpec {
            index: i,
            name: names::VOLUME_BINDING.to_string(),
            args: ArgsSpec::VolumeBinding {
                bind_timeout_seconds: Some(s),
                shape: None,
            },
        });
        converted.push("bindTimeoutSeconds -> VolumeBinding args bindTimeoutSeconds".into());
    }
    if let Some(true) = field!(r, top, "disablePreemption", boolean) {
        profile
            .plugins
            .post_filter
            .disabled
            .push(names::DEFAULT_PREEMPTION.to_string());
        converted
            .push("disablePreemption: true -> DefaultPreemption disabled at postFilter".into());
    }

    spec.profiles = vec![profile];
    let what = if converted.is_empty() {
        "the whole config became one profile".to_string()
    } else {
        converted.join("; ")
    };
    r.warn("apiVersion", msg::legacy_converted(&what))
        .hint("switch to apiVersion kubescheduler.config.k8s.io/v1 with a `profiles:` list");
    spec
}

/// A top-level legacy field that became a field of synthesized plugin args.
fn synthesized_arg(r: &mut Report, n: &Node, i: usize, arg: &str, shown: &str) {
    let entry = format!("{PROFILE}.pluginConfig[{i}]");
    let arg_path = format!("{entry}.args.{arg}");
    r.spans.record(&entry, n.pos);
    r.spans.record(&arg_path, n.pos);
    r.spans.alias(&entry, shown);
    r.spans.alias(&arg_path, shown);
}

fn merge_lock_field(
    r: &mut Report,
    new: &mut String,
    old: &str,
    new_name: &str,
    old_name: &str,
    converted: &mut Vec<String>,
) {
    if old.is_empty() {
        return;
    }
    if new.is_empty() {
        *new = old.to_string();
        converted.push(format!(
            "leaderElection.{old_name} -> leaderElection.{new_name}"
        ));
    } else if new != old {
        r.error(
            &format!("leaderElection.{old_name}"),
            msg::legacy_lock_conflict(new_name, old_name, new, old),
        )
        .hint(format!("keep only `{new_name}`"));
    }
}

fn algorithm_source(r: &mut Report, n: &Node) {
    let path = "algorithmSource";
    let Some(o) = r.object(n, path, &["provider", "policy"]) else {
        return;
    };
    let provider = field!(r, o, "provider", string);
    if o.has("policy") || provider.as_deref().is_some_and(|p| p != "DefaultProvider") {
        r.error(path, msg::ALGORITHM_SOURCE)
            .hint(msg::ALGORITHM_SOURCE_FIX);
    } else {
        r.warn(path, "algorithmSource.provider DefaultProvider is what the default plugins already do; ignored")
            .hint("delete algorithmSource");
    }
}

fn legacy_plugins(r: &mut Report, node: &Node) -> Plugins {
    let mut plugins = Plugins::default();
    let path = child(PROFILE, "plugins");
    let Some(o) = r.object(node, &path, LEGACY_PLUGIN_FIELDS) else {
        return plugins;
    };
    for field in LEGACY_PLUGIN_FIELDS {
        let Some(n) = o.get(field) else {
            continue;
        };
        match *field {
            "unreserve" => {
                r.error(&o.path(field), msg::UNRESERVE_MERGED)
                    .hint(msg::UNRESERVE_FIX);
            }
            "postFilter" => {
                // v1alpha1's postFilter ran before scoring: it is today's preScore.
                let internal = child(&path, "preScore");
                r.spans.alias(&internal, "plugins.postFilter");
                plugins.pre_score = decode_plugin_set(r, n, &internal);
            }
            other => {
                let point = ExtensionPoint::from_config_field(other)
                    .expect("legacy point names are v1 point names");
                *plugins.point_mut(point) = decode_plugin_set(r, n, &o.path(other));
            }
        }
    }
    plugins
}
