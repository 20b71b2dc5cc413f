//! Every message and fix text the config module shows, in one place so tests and
//! docs/configuration.md quote the same words. Field-error wording follows upstream's
//! `field.Error` style ("Invalid value: 200: not in valid range [0-100]").

use super::suggest::quoted_list;
use super::types::{API_VERSION, KIND, LEGACY_API_VERSION};
use super::yaml_tree::Node;

// --- YAML syntax -------------------------------------------------------------------------

pub const YAML_SYNTAX: &str = "YAML syntax error";
pub const YAML_SYNTAX_FIX: &str =
    "check indentation (spaces only, no tabs) and that every `[`/`{` and quote is closed";
pub const MULTIPLE_DOCUMENTS: &str =
    "the file holds more than one YAML document; a scheduler config is exactly one";
pub const MULTIPLE_DOCUMENTS_FIX: &str =
    "remove the `---` separator and every document except the KubeSchedulerConfiguration";
pub const COMPLEX_KEY: &str = "mapping keys must be plain strings";
pub const UNKNOWN_ALIAS: &str = "alias refers to an anchor that is not defined before it";

// --- decoding ----------------------------------------------------------------------------

pub const FIX_EXPECTED_MAPPING: &str = "write `field: value` pairs on indented lines below the key";
pub const FIX_EXPECTED_LIST: &str = "write one `- item` per line below the key";
pub const FIX_DUPLICATE_KEY: &str = "keep one of the two entries";
pub const FIX_DURATION: &str =
    "write a Go duration: a number with a unit (ns, us, ms, s, m, h), e.g. `15s` or `1m30s`";
pub const FIX_PLUGIN_NAME: &str = "every plugin entry needs `name: <PluginName>`";
pub const FIX_PLUGIN_CONFIG_NAME: &str =
    "every pluginConfig entry needs `name: <PluginName>` naming the plugin its args are for";
pub const GREATER_THAN_ZERO: &str = "must be greater than zero";

pub fn expected(what: &str, got: &Node) -> String {
    format!("expected {what}, got {}", got.describe())
}

pub fn duplicate_key(key: &str) -> String {
    format!("field {key:?} is set twice in the same mapping")
}

pub fn unknown_field(key: &str) -> String {
    format!("unknown field {key:?}")
}

pub fn int_out_of_range(i: i64, ty: &str) -> String {
    format!("integer {i} is out of range for {ty}")
}

pub fn invalid_embedded(type_name: &str, detail: &str) -> String {
    format!("not a valid {type_name}: {detail}")
}

pub fn args_kind_mismatch(plugin: &str, want: &str, got: &str) -> String {
    format!("args for plugin {plugin} were not of type {want}, got {got}")
}

/// Top-level fields that exist in other versions of the API, with where they went.
pub fn removed_field(path: &str, key: &str) -> Option<String> {
    if !path.is_empty() {
        return None;
    }
    let legacy = "it belongs to the legacy single-profile form";
    Some(match key {
        "schedulerName" => format!(
            "{legacy}; in v1 set `profiles[].schedulerName` (or use apiVersion {LEGACY_API_VERSION})"
        ),
        "plugins" | "pluginConfig" => format!(
            "{legacy}; in v1 move `{key}` under an entry of `profiles:` (or use apiVersion {LEGACY_API_VERSION})"
        ),
        "hardPodAffinitySymmetricWeight" => format!(
            "{legacy}; in v1 set `hardPodAffinityWeight` in the InterPodAffinity args under `profiles[].pluginConfig`"
        ),
        "algorithmSource" => ALGORITHM_SOURCE_FIX.to_string(),
        "profiles" | "parallelism" | "extenders" | "delayCacheUntilActive" => format!(
            "`{key}` is a v1 field; set `apiVersion: {API_VERSION}` (and move the legacy top-level profile fields under `profiles:`)"
        ),
        "healthzBindAddress" | "metricsBindAddress" => {
            "removed from the API in v1beta3; delete it (serving addresses are command-line flags)"
                .to_string()
        }
        "bindTimeoutSeconds" => {
            "moved to the VolumeBinding plugin args (`bindTimeoutSeconds` in VolumeBindingArgs)"
                .to_string()
        }
        "disablePreemption" => {
            "removed; disable the DefaultPreemption plugin at `postFilter` in the profile instead"
                .to_string()
        }
        _ => return None,
    })
}

// --- field-error formatting (upstream style) ----------------------------------------------

pub fn invalid(value: &str, detail: &str) -> String {
    format!("Invalid value: {value}: {detail}")
}

pub fn required(detail: &str) -> String {
    if detail.is_empty() {
        "Required value".to_string()
    } else {
        format!("Required value: {detail}")
    }
}

pub fn duplicate(value: &str) -> String {
    format!("Duplicate value: {value}")
}

pub fn not_supported(value: &str, supported: &[&str]) -> String {
    format!(
        "Unsupported value: {value:?}: supported values: {}",
        quoted_list(supported.iter().copied())
    )
}

pub fn forbidden(detail: &str) -> String {
    format!("Forbidden: {detail}")
}

// --- apiVersion / kind -------------------------------------------------------------------

pub const FIX_TYPE_META: &str = "start the file with\n    apiVersion: kubescheduler.config.k8s.io/v1\n    kind: KubeSchedulerConfiguration";
pub const NOT_A_MAPPING: &str =
    "a scheduler config must be a mapping (a KubeSchedulerConfiguration object)";

pub fn unsupported_api_version(v: &str) -> String {
    format!(
        "unsupported apiVersion {v:?}; supported: {API_VERSION:?} ({LEGACY_API_VERSION:?} only for legacy single-profile configs)"
    )
}

pub fn unsupported_api_version_fix(v: &str) -> String {
    if v.starts_with("kubescheduler.config.k8s.io/v1beta") {
        format!(
            "change apiVersion to {API_VERSION}; the v1beta versions were removed upstream (v1beta3 configs need no other change; older ones may name removed plugins)"
        )
    } else if v == "kubescheduler.config.k8s.io/v1alpha2" {
        format!("change apiVersion to {API_VERSION}; v1alpha2 profiles have the same shape")
    } else {
        format!("set `apiVersion: {API_VERSION}`")
    }
}

pub fn unsupported_kind(k: &str) -> String {
    format!("unsupported kind {k:?}; the only supported kind is {KIND:?}")
}

// --- legacy --------------------------------------------------------------------------------

pub const ALGORITHM_SOURCE: &str =
    "algorithmSource (scheduler Policy files and algorithm providers) is not supported";
pub const ALGORITHM_SOURCE_FIX: &str = "Policy was removed from kube-scheduler in 1.23: express it with plugins under `profiles[].plugins` and `profiles[].pluginConfig` in a v1 config";
pub const UNRESERVE_MERGED: &str =
    "the unreserve extension point was merged into reserve (Reserve plugins implement Unreserve)";
pub const UNRESERVE_FIX: &str = "move these entries to `reserve`";

pub fn legacy_converted(what: &str) -> String {
    format!("converted legacy {LEGACY_API_VERSION} config to {API_VERSION}: {what}")
}

pub fn legacy_ignored_field(key: &str) -> String {
    format!("legacy field {key:?} has no v1 equivalent and is ignored")
}

pub fn legacy_lock_conflict(new: &str, old: &str, a: &str, b: &str) -> String {
    format!("{new} and {old} are both set and do not match: {a:?} vs {b:?}")
}

// --- validation ----------------------------------------------------------------------------

pub const PARALLELISM: &str = "should be an integer value greater than zero";
pub const PERCENTAGE_RANGE: &str = "not in valid range [0-100]";
pub const POD_INITIAL_BACKOFF: &str = "must be greater than 0";
pub const POD_MAX_BACKOFF: &str = "must be greater than or equal to PodInitialBackoffSeconds";
pub const RESOURCE_LOCK_LEASES: &str = "resourceLock value must be \"leases\"";
pub const LEASE_GT_RENEW: &str = "must be greater than `RenewDeadline`";
pub const BURST_NON_NEGATIVE: &str = "must be non-negative";
pub const QPS_NEGATIVE_WARNING: &str =
    "a negative qps disables client-side rate limiting of API requests";
pub const PROFILES_REQUIRED: &str = "at least one profile is required";
pub const QUEUE_SORT_SAME: &str = "must be the same for all profiles";
pub const QUEUE_SORT_ARGS_SAME: &str = "queueSort must be the same for all profiles";
pub const QUEUE_SORT_ONLY_ONE: &str = "only one queue sort plugin can be enabled";
pub const QUEUE_SORT_FIX: &str = "all profiles share one scheduling queue, so they must use the same queueSort plugin (and args); configure queueSort identically in every profile";
pub const SCHEDULER_NAME_FIX: &str = "give every profile a unique, non-empty `schedulerName`; pods choose a profile with `spec.schedulerName`";
pub const NEGATIVE_WEIGHT: &str = "score plugin weights must not be negative";
pub const NEGATIVE_WEIGHT_FIX: &str =
    "use a weight of 1 or more (0 means the default 1), or disable the plugin at `score`";
pub const SCORE_OVERFLOW: &str = "total score of Score plugins could overflow";
pub const EXTENDER_WEIGHT: &str = "must have a positive weight applied to it";
pub const EXTENDER_WEIGHT_FIX: &str =
    "set `weight` to 1 or more: the extender's prioritize scores are multiplied by it";
pub const EXTENDER_URL_REQUIRED: &str = "an extender with a verb needs the URL its calls go to";
pub const EXTENDER_URL_FIX: &str = "set `urlPrefix` to the extender's base URL, e.g. `https://gpu-extender.kube-system:8443/scheduler`; each call goes to `<urlPrefix>/<verb>`";
pub const EXTENDER_URL_SCHEME: &str = "must be an http:// or https:// URL";
pub const EXTENDER_BINDERS: &str = "only one extender can implement bind";
pub const EXTENDER_BINDERS_FIX: &str =
    "keep `bindVerb` on one extender; a pod is bound by one binder";
pub const EXTENDER_RESOURCE_DUPLICATE: &str = "duplicate extender managed resource name";
pub const EXTENDER_RESOURCE_INVALID: &str = "is an invalid extended resource name";
pub const EXTENDER_RESOURCE_FIX: &str = "managed resources are extended resources named `<domain>/<name>` outside kubernetes.io, e.g. `example.com/gpu`, each listed by one extender once";
pub const EXTENDER_BASE64: &str = "is not valid base64";
pub const EXTENDER_BASE64_FIX: &str = "inline PEM data is base64-encoded, e.g. `caData: $(base64 -w0 ca.crt)`; or point `caFile`/`certFile`/`keyFile` at the PEM files";
pub const EXTENDER_CERT_KEY: &str = "a client certificate needs its key, and a key its certificate";
pub const EXTENDER_CERT_KEY_FIX: &str =
    "set both `certFile` (or `certData`) and `keyFile` (or `keyData`), or neither";
pub const EXTENDER_TLS_UNUSED: &str = "the urlPrefix is http://, so enableHTTPS and tlsConfig are not used (kube-scheduler takes the scheme from the URL too)";
pub const EXTENDER_NO_CA: &str = "enableHTTPS without caFile or caData: the extender's certificate is not verified, as kube-scheduler does (it sets insecure)";
pub const FILTER_TIMEOUT_RANGE: &str = "must be zero or positive";
pub const BINDING_TIMEOUT_RANGE: &str = "must be at least 1 second";
pub const FIX_DRA_TIMEOUT: &str = "write a positive Go duration such as `10s` (filterTimeout may be `0s`, which turns the limit off; bindingTimeout must be at least `1s`)";
pub const SHAPE_FIX: &str = "list points as `- {utilization: 0, score: 10}` with utilization 0-100 strictly increasing and score 0-10, or remove `shape` for the default (10 at 0%, 0 at 100%)";
/// PodGroup points ferrosched runs fixed (`placementFeasible`, `podGroupPostFilter`).
pub fn workload_field_unsupported(field: &str) -> String {
    format!(
        "{field} is not configurable in ferrosched yet: GangScheduling decides whether a group's placement meets its quorum and DefaultPreemption preempts for groups, as with kube-scheduler's defaults"
    )
}
pub const WORKLOAD_FIELD_FIX: &str = "remove the entries under `enabled` (disabling is accepted); no other plugin implements these points upstream";

pub fn plugin_does_not_exist(point: &str, name: &str) -> String {
    format!("{point}Plugin {name:?} does not exist")
}

pub fn plugin_does_not_extend(name: &str, point: &str) -> String {
    format!("plugin {name:?} does not extend {point}Plugin plugin")
}

pub fn plugin_already_registered(name: &str, point: &str) -> String {
    format!("plugin {name:?} already registered as \"{point}Plugin\"")
}

pub fn plugin_unsupported(name: &str, why: &str) -> String {
    format!("plugin {name:?} cannot be enabled: {why}")
}

pub fn queue_sort_count(profile: &str, n: usize) -> String {
    format!(
        "only one queue sort plugin required for profile with scheduler name {profile:?}, but got {n}"
    )
}

pub fn bind_required(profile: &str) -> String {
    format!("at least one bind plugin is needed for profile with scheduler name {profile:?}")
}

pub fn different_queue_sort(profile: &str, got: &str, first: &str) -> String {
    format!("different queue sort plugins for profile {profile:?}: {got:?}, first: {first:?}")
}

pub fn unknown_disabled(name: &str) -> String {
    format!("disabled plugin {name:?} is not a known plugin; the entry has no effect")
}

pub fn config_unknown_plugin(name: &str) -> String {
    format!(
        "pluginConfig for {name:?}: no plugin has this name, so the entry can never take effect"
    )
}

pub fn config_not_enabled(name: &str) -> String {
    format!("pluginConfig for {name:?} has no effect: the plugin is not enabled in this profile")
}

pub fn invalid_in_v1() -> String {
    format!(
        "was invalid in version {API_VERSION:?} (KubeSchedulerConfiguration is version {API_VERSION:?})"
    )
}

pub fn takes_no_args(name: &str) -> String {
    format!("plugin {name} takes no args")
}
