//! `kubescheduler.config.k8s.io/v1` document -> [`ConfigSpec`].

use crate::framework::ExtensionPoint;

use super::decode::{Obj, field};
use super::decode_args::decode_args;
use super::messages as msg;
use super::spans::{Report, child, index};
use super::spec::{ConfigSpec, LeaderElectionSpec, PluginConfigSpec, ProfileSpec};
use super::types::{
    ClientConnectionConfiguration, Extender, ExtenderManagedResource, ExtenderTlsConfig, PluginRef,
    PluginSet, Plugins,
};
use super::yaml_tree::{Node, Value};

pub(crate) const TOP_FIELDS: &[&str] = &[
    "apiVersion",
    "kind",
    "parallelism",
    "leaderElection",
    "clientConnection",
    "enableProfiling",
    "enableContentionProfiling",
    "percentageOfNodesToScore",
    "podInitialBackoffSeconds",
    "podMaxBackoffSeconds",
    "profiles",
    "extenders",
    "delayCacheUntilActive",
    "percentageOfPlacementsToScore",
];

const LEADER_ELECTION_FIELDS: &[&str] = &[
    "leaderElect",
    "leaseDuration",
    "renewDeadline",
    "retryPeriod",
    "resourceLock",
    "resourceName",
    "resourceNamespace",
];

const CLIENT_CONNECTION_FIELDS: &[&str] = &[
    "kubeconfig",
    "acceptContentTypes",
    "contentType",
    "qps",
    "burst",
];

const PROFILE_FIELDS: &[&str] = &[
    "schedulerName",
    "percentageOfNodesToScore",
    "percentageOfPlacementsToScore",
    "plugins",
    "pluginConfig",
];

pub(crate) const PLUGINS_FIELDS: &[&str] = &[
    "preEnqueue",
    "queueSort",
    "preFilter",
    "filter",
    "postFilter",
    "preScore",
    "score",
    "reserve",
    "permit",
    "preBind",
    "bind",
    "postBind",
    "multiPoint",
    "placementGenerate",
    "placementScore",
    "placementFeasible",
    "podGroupPostFilter",
];

/// PodGroup points of upstream's v1 `plugins` that ferrosched runs fixed (GangScheduling's
/// PlacementFeasible, DefaultPreemption's PodGroupPostFilter): they may be disabled, not
/// given other plugins. placementGenerate and placementScore are ordinary points.
const WORKLOAD_POINTS: &[&str] = &["placementFeasible", "podGroupPostFilter"];

/// `percentageOfPlacementsToScore` (global or per profile; its range is validated with
/// the other percentages).
fn workload_percentage(r: &mut Report, o: &Obj<'_>) -> Option<i32> {
    field!(r, o, "percentageOfPlacementsToScore", int32)
}

const EXTENDER_FIELDS: &[&str] = &[
    "urlPrefix",
    "filterVerb",
    "preemptVerb",
    "prioritizeVerb",
    "weight",
    "bindVerb",
    "enableHTTPS",
    "tlsConfig",
    "httpTimeout",
    "nodeCacheCapable",
    "managedResources",
    "ignorable",
];

pub(crate) fn decode_config(r: &mut Report, root: &Node) -> ConfigSpec {
    let mut spec = ConfigSpec::default();
    let Some(top) = r.object(root, "", TOP_FIELDS) else {
        return spec;
    };
    spec.parallelism = field!(r, top, "parallelism", int32);
    if let Some(n) = top.get("leaderElection") {
        spec.leader_election = decode_leader_election(r, n, "leaderElection");
    }
    if let Some(n) = top.get("clientConnection") {
        spec.client_connection = decode_client_connection(r, n, "clientConnection");
    }
    spec.enable_profiling = field!(r, top, "enableProfiling", boolean);
    spec.enable_contention_profiling = field!(r, top, "enableContentionProfiling", boolean);
    spec.percentage_of_nodes_to_score = field!(r, top, "percentageOfNodesToScore", int32);
    spec.pod_initial_backoff_seconds = field!(r, top, "podInitialBackoffSeconds", int64);
    spec.pod_max_backoff_seconds = field!(r, top, "podMaxBackoffSeconds", int64);
    spec.delay_cache_until_active =
        field!(r, top, "delayCacheUntilActive", boolean).unwrap_or(false);
    spec.percentage_of_placements_to_score = workload_percentage(r, &top);
    if let Some(n) = top.get("profiles") {
        let path = top.path("profiles");
        if let Some(items) = r.list(n, &path) {
            for (i, item) in items.iter().enumerate() {
                spec.profiles
                    .push(decode_profile(r, item, &index(&path, i), false));
            }
        }
    }
    if let Some(n) = top.get("extenders") {
        let path = top.path("extenders");
        if let Some(items) = r.list(n, &path) {
            for (i, item) in items.iter().enumerate() {
                spec.extenders
                    .push(decode_extender(r, item, &index(&path, i)));
            }
        }
    }
    spec
}

pub(crate) fn decode_leader_election(
    r: &mut Report,
    node: &Node,
    path: &str,
) -> LeaderElectionSpec {
    decode_leader_election_with(r, node, path, LEADER_ELECTION_FIELDS)
        .map(|(le, _)| le)
        .unwrap_or_default()
}

/// Shared with the legacy decoder, which allows two more (deprecated) field names.
pub(crate) fn decode_leader_election_with<'n>(
    r: &mut Report,
    node: &'n Node,
    path: &str,
    fields: &[&str],
) -> Option<(LeaderElectionSpec, super::decode::Obj<'n>)> {
    let o = r.object(node, path, fields)?;
    let le = LeaderElectionSpec {
        leader_elect: field!(r, o, "leaderElect", boolean),
        lease_duration: field!(r, o, "leaseDuration", duration),
        renew_deadline: field!(r, o, "renewDeadline", duration),
        retry_period: field!(r, o, "retryPeriod", duration),
        resource_lock: field!(r, o, "resourceLock", string).unwrap_or_default(),
        resource_name: field!(r, o, "resourceName", string).unwrap_or_default(),
        resource_namespace: field!(r, o, "resourceNamespace", string).unwrap_or_default(),
    };
    Some((le, o))
}

pub(crate) fn decode_client_connection(
    r: &mut Report,
    node: &Node,
    path: &str,
) -> ClientConnectionConfiguration {
    let Some(o) = r.object(node, path, CLIENT_CONNECTION_FIELDS) else {
        return ClientConnectionConfiguration::default();
    };
    ClientConnectionConfiguration {
        kubeconfig: field!(r, o, "kubeconfig", string).unwrap_or_default(),
        accept_content_types: field!(r, o, "acceptContentTypes", string).unwrap_or_default(),
        content_type: field!(r, o, "contentType", string).unwrap_or_default(),
        qps: field!(r, o, "qps", float32).unwrap_or(0.0),
        burst: field!(r, o, "burst", int32).unwrap_or(0),
    }
}

fn decode_profile(r: &mut Report, node: &Node, path: &str, legacy: bool) -> ProfileSpec {
    let mut p = ProfileSpec::default();
    let Some(o) = r.object(node, path, PROFILE_FIELDS) else {
        return p;
    };
    p.scheduler_name = field!(r, o, "schedulerName", string);
    p.percentage_of_nodes_to_score = field!(r, o, "percentageOfNodesToScore", int32);
    p.percentage_of_placements_to_score = workload_percentage(r, &o);
    if let Some(n) = o.get("plugins") {
        p.plugins = decode_plugins(r, n, &o.path("plugins"), PLUGINS_FIELDS);
    }
    if let Some(n) = o.get("pluginConfig") {
        p.plugin_config = decode_plugin_config(r, n, &o.path("pluginConfig"), legacy);
    }
    p
}

/// `fields` lists the point names the document's version knows.
pub(crate) fn decode_plugins(r: &mut Report, node: &Node, path: &str, fields: &[&str]) -> Plugins {
    let mut plugins = Plugins::default();
    let Some(o) = r.object(node, path, fields) else {
        return plugins;
    };
    if let Some(n) = o.get("multiPoint") {
        plugins.multi_point = decode_plugin_set(r, n, &o.path("multiPoint"));
    }
    for p in ExtensionPoint::ALL {
        if let Some(n) = o.get(p.config_field()) {
            *plugins.point_mut(p) = decode_plugin_set(r, n, &o.path(p.config_field()));
        }
    }
    for point in WORKLOAD_POINTS {
        if !fields.contains(point) {
            continue;
        }
        if let Some(n) = o.get(point) {
            let p = o.path(point);
            // Disabling plugins at a point nobody runs is harmless; enabling one is not.
            let set = decode_plugin_set(r, n, &p);
            if !set.enabled.is_empty() {
                r.error(
                    &child(&p, "enabled"),
                    msg::workload_field_unsupported(&format!("plugins.{point}")),
                )
                .hint(msg::WORKLOAD_FIELD_FIX);
            }
        }
    }
    plugins
}

pub(crate) fn decode_plugin_set(r: &mut Report, node: &Node, path: &str) -> PluginSet {
    let mut set = PluginSet::default();
    let Some(o) = r.object(node, path, &["enabled", "disabled"]) else {
        return set;
    };
    if let Some(n) = o.get("enabled") {
        let lp = o.path("enabled");
        if let Some(items) = r.list(n, &lp) {
            for (i, item) in items.iter().enumerate() {
                // Entries that fail to decode stay as empty names so later indices still
                // match the file.
                set.enabled.push(
                    decode_plugin(r, item, &index(&lp, i)).unwrap_or(PluginRef::new("", None)),
                );
            }
        }
    }
    if let Some(n) = o.get("disabled") {
        let lp = o.path("disabled");
        if let Some(items) = r.list(n, &lp) {
            for (i, item) in items.iter().enumerate() {
                let p = decode_plugin(r, item, &index(&lp, i)).map(|p| p.name);
                set.disabled.push(p.unwrap_or_default());
            }
        }
    }
    set
}

fn decode_plugin(r: &mut Report, node: &Node, path: &str) -> Option<PluginRef> {
    if let Value::Str(s) = &node.value {
        r.error(
            path,
            msg::expected("a mapping with `name` (and `weight`)", node),
        )
        .hint(format!("write `- name: {s}`"));
        return None;
    }
    let o = r.object(node, path, &["name", "weight"])?;
    let name = field!(r, o, "name", string);
    let weight = field!(r, o, "weight", int32);
    match name {
        Some(name) if !name.is_empty() => Some(PluginRef { name, weight }),
        Some(_) => {
            r.error(&o.path("name"), msg::required(""))
                .hint(msg::FIX_PLUGIN_NAME);
            None
        }
        None if !o.has("name") => {
            r.error(&o.path("name"), msg::required(""))
                .hint(msg::FIX_PLUGIN_NAME);
            None
        }
        None => None,
    }
}

pub(crate) fn decode_plugin_config(
    r: &mut Report,
    node: &Node,
    path: &str,
    legacy: bool,
) -> Vec<PluginConfigSpec> {
    let mut out = Vec::new();
    let Some(items) = r.list(node, path) else {
        return out;
    };
    for (i, item) in items.iter().enumerate() {
        let ip = index(path, i);
        let Some(o) = r.object(item, &ip, &["name", "args"]) else {
            continue;
        };
        let Some(name) = field!(r, o, "name", string).filter(|n| !n.is_empty()) else {
            if !o.has("name") || matches!(o.get("name").map(|n| &n.value), Some(Value::Str(_))) {
                r.error(&o.path("name"), msg::required(""))
                    .hint(msg::FIX_PLUGIN_CONFIG_NAME);
            }
            continue;
        };
        let args = decode_args(r, &name, o.get("args"), &o.path("args"), legacy);
        out.push(PluginConfigSpec {
            index: i,
            name,
            args,
        });
    }
    out
}

fn decode_extender(r: &mut Report, node: &Node, path: &str) -> Extender {
    let mut e = Extender::default();
    let Some(o) = r.object(node, path, EXTENDER_FIELDS) else {
        return e;
    };
    e.url_prefix = field!(r, o, "urlPrefix", string).unwrap_or_default();
    e.filter_verb = field!(r, o, "filterVerb", string).unwrap_or_default();
    e.preempt_verb = field!(r, o, "preemptVerb", string).unwrap_or_default();
    e.prioritize_verb = field!(r, o, "prioritizeVerb", string).unwrap_or_default();
    e.weight = field!(r, o, "weight", int64).unwrap_or(0);
    e.bind_verb = field!(r, o, "bindVerb", string).unwrap_or_default();
    e.enable_https = field!(r, o, "enableHTTPS", boolean).unwrap_or(false);
    e.http_timeout = field!(r, o, "httpTimeout", duration).unwrap_or_default();
    e.node_cache_capable = field!(r, o, "nodeCacheCapable", boolean).unwrap_or(false);
    e.ignorable = field!(r, o, "ignorable", boolean).unwrap_or(false);
    if let Some(n) = o.get("tlsConfig") {
        let tp = o.path("tlsConfig");
        if let Some(t) = r.object(
            n,
            &tp,
            &[
                "insecure",
                "serverName",
                "certFile",
                "keyFile",
                "caFile",
                "certData",
                "keyData",
                "caData",
            ],
        ) {
            e.tls_config = Some(ExtenderTlsConfig {
                insecure: field!(r, t, "insecure", boolean).unwrap_or(false),
                server_name: field!(r, t, "serverName", string).unwrap_or_default(),
                cert_file: field!(r, t, "certFile", string).unwrap_or_default(),
                key_file: field!(r, t, "keyFile", string).unwrap_or_default(),
                ca_file: field!(r, t, "caFile", string).unwrap_or_default(),
                cert_data: field!(r, t, "certData", string).unwrap_or_default(),
                key_data: field!(r, t, "keyData", string).unwrap_or_default(),
                ca_data: field!(r, t, "caData", string).unwrap_or_default(),
            });
        }
    }
    if let Some(n) = o.get("managedResources") {
        let mp = o.path("managedResources");
        if let Some(items) = r.list(n, &mp) {
            for (i, item) in items.iter().enumerate() {
                let ip = index(&mp, i);
                if let Some(m) = r.object(item, &ip, &["name", "ignoredByScheduler"]) {
                    e.managed_resources.push(ExtenderManagedResource {
                        name: field!(r, m, "name", string).unwrap_or_default(),
                        ignored_by_scheduler: field!(r, m, "ignoredByScheduler", boolean)
                            .unwrap_or(false),
                    });
                }
            }
        }
    }
    e
}
