//! The fully defaulted `kubescheduler.config.k8s.io/v1` configuration, as the rest of the
//! crate uses it. Serializes back to v1 YAML (camelCase) for `to_yaml`.

use std::time::Duration;

use serde::Serialize;

use crate::framework::ExtensionPoint;

pub use super::args::*;

/// The only `apiVersion` ferrosched reads natively.
pub const API_VERSION: &str = "kubescheduler.config.k8s.io/v1";
/// Accepted only as the legacy single-profile form, converted on load.
pub const LEGACY_API_VERSION: &str = "kubescheduler.config.k8s.io/v1alpha1";
pub const API_GROUP: &str = "kubescheduler.config.k8s.io";
pub const KIND: &str = "KubeSchedulerConfiguration";
/// Name of the profile pods get when they set no `spec.schedulerName`.
pub const DEFAULT_SCHEDULER_NAME: &str = "default-scheduler";

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KubeSchedulerConfiguration {
    pub parallelism: i32,
    pub leader_election: LeaderElectionConfiguration,
    pub client_connection: ClientConnectionConfiguration,
    pub enable_profiling: bool,
    pub enable_contention_profiling: bool,
    /// 0 means adaptive (5%..50% depending on cluster size); upstream defaults it to 0.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub percentage_of_nodes_to_score: Option<i32>,
    /// How many of a topology-constrained group's feasible placements are evaluated before
    /// one is picked; unset or 0: adaptive (100% down to 5% as the placements' nodes add
    /// up). Only shown when set, as upstream's optional field.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub percentage_of_placements_to_score: Option<i32>,
    pub pod_initial_backoff_seconds: i64,
    pub pod_max_backoff_seconds: i64,
    pub profiles: Vec<Profile>,
    /// Parsed so errors can point at them; any entry makes loading fail (not supported yet).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub extenders: Vec<Extender>,
    pub delay_cache_until_active: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaderElectionConfiguration {
    pub leader_elect: bool,
    #[serde(serialize_with = "super::duration::serialize")]
    pub lease_duration: Duration,
    #[serde(serialize_with = "super::duration::serialize")]
    pub renew_deadline: Duration,
    #[serde(serialize_with = "super::duration::serialize")]
    pub retry_period: Duration,
    pub resource_lock: String,
    pub resource_name: String,
    pub resource_namespace: String,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClientConnectionConfiguration {
    pub kubeconfig: String,
    pub accept_content_types: String,
    pub content_type: String,
    pub qps: f32,
    pub burst: i32,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Profile {
    pub scheduler_name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub percentage_of_nodes_to_score: Option<i32>,
    /// Overrides the global one for this profile's groups.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub percentage_of_placements_to_score: Option<i32>,
    pub plugins: Plugins,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub plugin_config: Vec<PluginConfig>,
}

impl Profile {
    /// The args configured (or defaulted) for `plugin` in this profile.
    pub fn args(&self, plugin: &str) -> Option<&PluginArgs> {
        self.plugin_config
            .iter()
            .find(|c| c.name == plugin)
            .map(|c| &c.args)
    }
}

/// Plugin sets per extension point, plus the `multiPoint` shorthand.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Plugins {
    #[serde(skip_serializing_if = "PluginSet::is_empty")]
    pub pre_enqueue: PluginSet,
    #[serde(skip_serializing_if = "PluginSet::is_empty")]
    pub queue_sort: PluginSet,
    #[serde(skip_serializing_if = "PluginSet::is_empty")]
    pub pre_filter: PluginSet,
    #[serde(skip_serializing_if = "PluginSet::is_empty")]
    pub filter: PluginSet,
    #[serde(skip_serializing_if = "PluginSet::is_empty")]
    pub post_filter: PluginSet,
    #[serde(skip_serializing_if = "PluginSet::is_empty")]
    pub pre_score: PluginSet,
    #[serde(skip_serializing_if = "PluginSet::is_empty")]
    pub score: PluginSet,
    #[serde(skip_serializing_if = "PluginSet::is_empty")]
    pub reserve: PluginSet,
    #[serde(skip_serializing_if = "PluginSet::is_empty")]
    pub permit: PluginSet,
    #[serde(skip_serializing_if = "PluginSet::is_empty")]
    pub pre_bind: PluginSet,
    #[serde(skip_serializing_if = "PluginSet::is_empty")]
    pub bind: PluginSet,
    #[serde(skip_serializing_if = "PluginSet::is_empty")]
    pub post_bind: PluginSet,
    #[serde(skip_serializing_if = "PluginSet::is_empty")]
    pub multi_point: PluginSet,
    #[serde(skip_serializing_if = "PluginSet::is_empty")]
    pub placement_generate: PluginSet,
    #[serde(skip_serializing_if = "PluginSet::is_empty")]
    pub placement_score: PluginSet,
}

impl Plugins {
    pub fn point(&self, p: ExtensionPoint) -> &PluginSet {
        use ExtensionPoint::*;
        match p {
            PreEnqueue => &self.pre_enqueue,
            QueueSort => &self.queue_sort,
            PreFilter => &self.pre_filter,
            Filter => &self.filter,
            PostFilter => &self.post_filter,
            PreScore => &self.pre_score,
            Score => &self.score,
            Reserve => &self.reserve,
            Permit => &self.permit,
            PreBind => &self.pre_bind,
            Bind => &self.bind,
            PostBind => &self.post_bind,
            PlacementGenerate => &self.placement_generate,
            PlacementScore => &self.placement_score,
        }
    }

    pub fn point_mut(&mut self, p: ExtensionPoint) -> &mut PluginSet {
        use ExtensionPoint::*;
        match p {
            PreEnqueue => &mut self.pre_enqueue,
            QueueSort => &mut self.queue_sort,
            PreFilter => &mut self.pre_filter,
            Filter => &mut self.filter,
            PostFilter => &mut self.post_filter,
            PreScore => &mut self.pre_score,
            Score => &mut self.score,
            Reserve => &mut self.reserve,
            Permit => &mut self.permit,
            PreBind => &mut self.pre_bind,
            Bind => &mut self.bind,
            PostBind => &mut self.post_bind,
            PlacementGenerate => &mut self.placement_generate,
            PlacementScore => &mut self.placement_score,
        }
    }

    /// Every plugin enabled anywhere (multiPoint or a specific point), deduplicated, sorted.
    pub fn enabled_names(&self) -> Vec<String> {
        let mut names: Vec<String> = ExtensionPoint::ALL
            .iter()
            .map(|p| self.point(*p))
            .chain(std::iter::once(&self.multi_point))
            .flat_map(|s| s.enabled.iter().map(|p| p.name.clone()))
            .collect();
        names.sort();
        names.dedup();
        names
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct PluginSet {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub enabled: Vec<PluginRef>,
    /// Names, or `"*"` for all defaults; printed as `{name: ...}` objects like upstream.
    #[serde(
        skip_serializing_if = "Vec::is_empty",
        serialize_with = "serialize_disabled"
    )]
    pub disabled: Vec<String>,
}

impl PluginSet {
    pub fn is_empty(&self) -> bool {
        self.enabled.is_empty() && self.disabled.is_empty()
    }
}

fn serialize_disabled<S: serde::Serializer>(names: &[String], s: S) -> Result<S::Ok, S::Error> {
    #[derive(Serialize)]
    struct Named<'a> {
        name: &'a str,
    }
    s.collect_seq(names.iter().map(|n| Named { name: n }))
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PluginRef {
    pub name: String,
    /// Only meaningful for Score plugins (at `score` or `multiPoint`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub weight: Option<i32>,
}

impl PluginRef {
    pub fn new(name: &str, weight: Option<i32>) -> Self {
        PluginRef {
            name: name.to_string(),
            weight,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PluginConfig {
    pub name: String,
    pub args: PluginArgs,
}

/// A scheduler extender: an HTTP service the scheduling cycle calls after Filter (filter),
/// after Score (prioritize), at PostFilter (preempt) and instead of DefaultBinder (bind), as
/// upstream's `HTTPExtender`. Defaulted as upstream: `httpTimeout` 0 becomes
/// [`DEFAULT_EXTENDER_TIMEOUT`] (upstream applies it when it builds the extender); `weight`
/// is not defaulted (validation wants it positive when `prioritizeVerb` is set).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Extender {
    pub url_prefix: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub filter_verb: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub preempt_verb: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub prioritize_verb: String,
    pub weight: i64,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub bind_verb: String,
    #[serde(rename = "enableHTTPS")]
    pub enable_https: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_config: Option<ExtenderTlsConfig>,
    #[serde(serialize_with = "super::duration::serialize")]
    pub http_timeout: Duration,
    pub node_cache_capable: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub managed_resources: Vec<ExtenderManagedResource>,
    pub ignorable: bool,
}

/// Upstream's `DefaultExtenderTimeout`.
pub const DEFAULT_EXTENDER_TIMEOUT: Duration = Duration::from_secs(5);

impl Extender {
    /// Whether `resource` is one of this extender's managed resources.
    pub fn manages(&self, resource: &str) -> bool {
        self.managed_resources.iter().any(|m| m.name == resource)
    }

    /// The name upstream's `HTTPExtender.Name` gives it: its URL prefix.
    pub fn name(&self) -> &str {
        &self.url_prefix
    }
}

/// Resources NodeResourcesFit leaves out because an extender manages them with
/// `ignoredByScheduler: true` (upstream passes them to the plugin as ignoredResources).
pub fn extender_ignored_resources(extenders: &[Extender]) -> Vec<String> {
    extenders
        .iter()
        .flat_map(|e| e.managed_resources.iter())
        .filter(|m| m.ignored_by_scheduler)
        .map(|m| m.name.clone())
        .collect()
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExtenderTlsConfig {
    pub insecure: bool,
    pub server_name: String,
    pub cert_file: String,
    pub key_file: String,
    pub ca_file: String,
    /// Base64 text as written in the config.
    pub cert_data: String,
    pub key_data: String,
    pub ca_data: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExtenderManagedResource {
    pub name: String,
    pub ignored_by_scheduler: bool,
}
