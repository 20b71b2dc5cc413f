//! Upstream `ValidateKubeSchedulerConfiguration` plus the checks kube-scheduler only makes
//! when it builds the frameworks (unknown plugins, points, double registration), all
//! collected in one pass. Per-entry checks read the document as written (so paths and
//! lines match the file); global ones read the defaulted config.

use std::collections::{HashMap, HashSet};

use crate::framework::ExtensionPoint;
use crate::plugins::catalog;

use super::defaults::default_args;
use super::expand::{ExpandedProfile, expand_profile};
use super::messages as msg;
use super::spans::{Report, child, index};
use super::spec::{ArgsSpec, ConfigSpec, ProfileSpec};
use super::suggest::closest;
use super::types::*;
use super::validation_args::validate_args;

/// Plugins upstream's v1 validation rejects by name, in `pluginConfig` too.
const INVALID_IN_V1: &[&str] = &[
    "AzureDiskLimits",
    "CinderLimits",
    "EBSLimits",
    "GCEPDLimits",
];

/// The JitterFactor client-go's leader elector applies to retryPeriod.
const LEADER_ELECTION_JITTER: f64 = 1.2;

/// Validates and expands. Returns the expanded profiles (complete only without errors).
pub(crate) fn validate(
    r: &mut Report,
    spec: &ConfigSpec,
    cfg: &KubeSchedulerConfiguration,
) -> Vec<ExpandedProfile> {
    client_connection(r, &cfg.client_connection);
    leader_election(r, &cfg.leader_election);
    if cfg.parallelism <= 0 {
        r.error(
            "parallelism",
            msg::invalid(&cfg.parallelism.to_string(), msg::PARALLELISM),
        )
        .hint("set parallelism to a positive number of workers, e.g. 16 (the default)");
    }
    percentage(
        r,
        "percentageOfNodesToScore",
        cfg.percentage_of_nodes_to_score,
    );
    percentage(
        r,
        "percentageOfPlacementsToScore",
        cfg.percentage_of_placements_to_score,
    );
    if cfg.pod_initial_backoff_seconds <= 0 {
        r.error(
            "podInitialBackoffSeconds",
            msg::invalid(
                &cfg.pod_initial_backoff_seconds.to_string(),
                msg::POD_INITIAL_BACKOFF,
            ),
        );
    }
    if cfg.pod_max_backoff_seconds < cfg.pod_initial_backoff_seconds {
        r.error(
            "podMaxBackoffSeconds",
            msg::invalid(
                &cfg.pod_max_backoff_seconds.to_string(),
                msg::POD_MAX_BACKOFF,
            ),
        )
        .hint(format!(
            "raise podMaxBackoffSeconds to at least podInitialBackoffSeconds ({})",
            cfg.pod_initial_backoff_seconds
        ));
    }
    extenders(r, &cfg.extenders);

    if cfg.profiles.is_empty() {
        r.error("profiles", msg::required(msg::PROFILES_REQUIRED));
        return Vec::new();
    }

    let mut names: HashMap<&str, usize> = HashMap::new();
    let mut expanded = Vec::new();
    let empty = ProfileSpec::default();
    for (i, profile) in cfg.profiles.iter().enumerate() {
        let path = index("profiles", i);
        let pspec = spec.profiles.get(i).unwrap_or(&empty);
        if profile.scheduler_name.is_empty() {
            r.error(&child(&path, "schedulerName"), msg::required(""))
                .hint(msg::SCHEDULER_NAME_FIX);
        } else if let Some(first) = names.get(profile.scheduler_name.as_str()) {
            r.error(
                &child(&path, "schedulerName"),
                msg::duplicate(&format!(
                    "{:?} (also the name of profiles[{first}])",
                    profile.scheduler_name
                )),
            )
            .hint(msg::SCHEDULER_NAME_FIX);
        } else {
            names.insert(&profile.scheduler_name, i);
        }
        percentage(
            r,
            &child(&path, "percentageOfNodesToScore"),
            profile.percentage_of_nodes_to_score,
        );
        percentage(
            r,
            &child(&path, "percentageOfPlacementsToScore"),
            profile.percentage_of_placements_to_score,
        );

        let before = r.errors.len();
        plugin_entries(r, &child(&path, "plugins"), &pspec.plugins);
        // Entries that failed to decode stay as empty names; they were reported already.
        let undecoded = std::iter::once(&pspec.plugins.multi_point)
            .chain(ExtensionPoint::ALL.iter().map(|p| pspec.plugins.point(*p)))
            .any(|s| s.enabled.iter().any(|p| p.name.is_empty()));
        let entries_ok = r.errors.len() == before && !undecoded;
        plugin_config(r, &path, pspec, profile);

        // Framework-level checks only make sense once every entry is a known plugin at a
        // point it implements; otherwise they would repeat the errors above.
        if entries_ok {
            let (mut e, issues) = expand_profile(profile);
            // A profile without its own placement percentage takes the global one.
            e.percentage_of_placements_to_score = profile
                .percentage_of_placements_to_score
                .or(cfg.percentage_of_placements_to_score);
            for issue in issues {
                let err = r.error(&child(&path, &issue.path), issue.message);
                if let Some(fix) = issue.fix {
                    err.hint(fix);
                }
            }
            expanded.push(e);
        }
    }
    common_queue_sort(r, &cfg.profiles, &expanded);
    expanded
}

/// Upstream `validateExtenders`, plus what upstream only finds when it builds the extenders
/// (a verb without a URL, inline TLS data that is not base64, a certificate without its key).
fn extenders(r: &mut Report, extenders: &[Extender]) {
    use base64::Engine as _;
    let mut binders = 0;
    let mut managed: HashSet<&str> = HashSet::new();
    for (i, e) in extenders.iter().enumerate() {
        let path = index("extenders", i);
        let has_verb = [
            &e.filter_verb,
            &e.prioritize_verb,
            &e.preempt_verb,
            &e.bind_verb,
        ]
        .iter()
        .any(|v| !v.is_empty());
        let url = child(&path, "urlPrefix");
        if e.url_prefix.is_empty() {
            if has_verb {
                r.error(&url, msg::required(msg::EXTENDER_URL_REQUIRED))
                    .hint(msg::EXTENDER_URL_FIX);
            }
        } else if !(e.url_prefix.starts_with("http://") || e.url_prefix.starts_with("https://")) {
            r.error(
                &url,
                msg::invalid(&format!("{:?}", e.url_prefix), msg::EXTENDER_URL_SCHEME),
            )
            .hint(msg::EXTENDER_URL_FIX);
        }
        if !e.prioritize_verb.is_empty() && e.weight <= 0 {
            r.error(
                &child(&path, "weight"),
                msg::invalid(&e.weight.to_string(), msg::EXTENDER_WEIGHT),
            )
            .hint(msg::EXTENDER_WEIGHT_FIX);
        }
        if !e.bind_verb.is_empty() {
            binders += 1;
        }
        for (j, m) in e.managed_resources.iter().enumerate() {
            let name_path = child(&index(&child(&path, "managedResources"), j), "name");
            let errs = crate::k8s_names::qualified_name_errors(&m.name);
            let shown = format!("{:?}", m.name);
            if !errs.is_empty() {
                for err in errs {
                    r.error(&name_path, msg::invalid(&shown, &err))
                        .hint(msg::EXTENDER_RESOURCE_FIX);
                }
            } else if !crate::types::is_extended_resource_name(&m.name) {
                r.error(
                    &name_path,
                    msg::invalid(&shown, msg::EXTENDER_RESOURCE_INVALID),
                )
                .hint(msg::EXTENDER_RESOURCE_FIX);
            }
            if !managed.insert(&m.name) {
                r.error(
                    &name_path,
                    msg::invalid(&shown, msg::EXTENDER_RESOURCE_DUPLICATE),
                )
                .hint(msg::EXTENDER_RESOURCE_FIX);
            }
        }
        let tls_path = child(&path, "tlsConfig");
        if let Some(t) = &e.tls_config {
            for (field, data) in [
                ("certData", &t.cert_data),
                ("keyData", &t.key_data),
                ("caData", &t.ca_data),
            ] {
                if !data.is_empty()
                    && base64::engine::general_purpose::STANDARD
                        .decode(data.trim())
                        .is_err()
                {
                    r.error(&child(&tls_path, field), msg::EXTENDER_BASE64)
                        .hint(msg::EXTENDER_BASE64_FIX);
                }
            }
            let cert = !t.cert_file.is_empty() || !t.cert_data.is_empty();
            let key = !t.key_file.is_empty() || !t.key_data.is_empty();
            if cert != key {
                r.error(&tls_path, msg::EXTENDER_CERT_KEY)
                    .hint(msg::EXTENDER_CERT_KEY_FIX);
            }
        }
        if e.url_prefix.starts_with("http://") && (e.enable_https || e.tls_config.is_some()) {
            r.warn(&url, msg::EXTENDER_TLS_UNUSED);
        } else if e.enable_https
            && e.tls_config
                .as_ref()
                .is_none_or(|t| t.ca_file.is_empty() && t.ca_data.is_empty())
        {
            r.warn(&child(&path, "enableHTTPS"), msg::EXTENDER_NO_CA);
        }
    }
    if binders > 1 {
        r.error(
            "extenders",
            msg::invalid(
                &format!("\"found {binders} extenders implementing bind\""),
                msg::EXTENDER_BINDERS,
            ),
        )
        .hint(msg::EXTENDER_BINDERS_FIX);
    }
}

fn percentage(r: &mut Report, path: &str, v: Option<i32>) {
    if let Some(p) = v
        && !(0..=100).contains(&p)
    {
        r.error(path, msg::invalid(&p.to_string(), msg::PERCENTAGE_RANGE))
                .hint("use a percentage from 0 to 100; 0 lets the scheduler pick one from the cluster size");
    }
}

fn client_connection(r: &mut Report, cc: &ClientConnectionConfiguration) {
    if cc.burst < 0 {
        r.error(
            "clientConnection.burst",
            msg::invalid(&cc.burst.to_string(), msg::BURST_NON_NEGATIVE),
        );
    }
    if cc.qps < 0.0 {
        r.warn("clientConnection.qps", msg::QPS_NEGATIVE_WARNING);
    }
}

fn leader_election(r: &mut Report, le: &LeaderElectionConfiguration) {
    if !le.leader_elect {
        return;
    }
    use super::duration::format_go_duration as fmt;
    for (field, d) in [
        ("leaseDuration", le.lease_duration),
        ("renewDeadline", le.renew_deadline),
        ("retryPeriod", le.retry_period),
    ] {
        if d.is_zero() {
            r.error(
                &format!("leaderElection.{field}"),
                msg::invalid(&format!("{:?}", fmt(d)), msg::GREATER_THAN_ZERO),
            );
        }
    }
    if le.lease_duration <= le.renew_deadline {
        r.error(
            "leaderElection.leaseDuration",
            msg::invalid(
                &format!("{:?}", fmt(le.renew_deadline)),
                msg::LEASE_GT_RENEW,
            ),
        )
        .hint("leaseDuration must exceed renewDeadline (defaults: 15s and 10s)");
    } else if le.renew_deadline.as_secs_f64()
        <= LEADER_ELECTION_JITTER * le.retry_period.as_secs_f64()
    {
        // client-go's leader elector refuses this at startup.
        r.error(
            "leaderElection.renewDeadline",
            msg::invalid(
                &format!("{:?}", fmt(le.renew_deadline)),
                "renewDeadline must be greater than retryPeriod*JitterFactor (1.2)",
            ),
        )
        .hint("lower retryPeriod or raise renewDeadline (defaults: 2s and 10s)");
    }
    for (field, v) in [
        ("resourceLock", &le.resource_lock),
        ("resourceNamespace", &le.resource_namespace),
        ("resourceName", &le.resource_name),
    ] {
        if v.is_empty() {
            r.error(&format!("leaderElection.{field}"), msg::required(""));
        }
    }
    if !le.resource_lock.is_empty() && le.resource_lock != "leases" {
        r.error(
            "leaderElection.resourceLock",
            msg::invalid(
                &format!("{:?}", le.resource_lock),
                msg::RESOURCE_LOCK_LEASES,
            ),
        )
        .hint("set `resourceLock: leases` (endpoints and configmaps locks were removed)");
    }
}

fn suggest_plugin(name: &str) -> Option<&'static str> {
    closest(name, catalog::PLUGINS.iter().map(|p| p.name))
}

fn unknown_plugin_hint(name: &str) -> String {
    match suggest_plugin(name) {
        Some(s) => format!("did you mean `{s}`?"),
        None => format!(
            "known plugins: {}",
            catalog::PLUGINS
                .iter()
                .map(|p| p.name)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

fn points_of(name: &str) -> String {
    catalog::lookup(name)
        .map(|s| {
            s.points
                .iter()
                .map(|p| p.config_field())
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default()
}

/// Per-entry checks of a profile's plugin sets, as written in the file.
fn plugin_entries(r: &mut Report, path: &str, plugins: &Plugins) {
    let sets = std::iter::once((None, &plugins.multi_point)).chain(
        ExtensionPoint::ALL
            .iter()
            .map(|p| (Some(*p), plugins.point(*p))),
    );
    for (point, set) in sets {
        let field = point.map_or("multiPoint", |p| p.config_field());
        let sp = child(path, field);
        let ep = child(&sp, "enabled");
        let mut seen: HashSet<&str> = HashSet::new();
        for (i, p) in set.enabled.iter().enumerate() {
            if p.name.is_empty() {
                continue; // reported while decoding
            }
            let pp = index(&ep, i);
            let np = child(&pp, "name");
            let Some(plugin) = catalog::lookup(&p.name) else {
                if let Some(why) = catalog::known_but_unsupported(&p.name) {
                    r.error(&np, msg::plugin_unsupported(&p.name, why))
                        .hint(format!("remove `{}` from this list", p.name));
                } else {
                    let m = match point {
                        Some(pt) => msg::plugin_does_not_exist(pt.display_name(), &p.name),
                        None => format!("plugin {:?} does not exist", p.name),
                    };
                    r.error(&np, m).hint(unknown_plugin_hint(&p.name));
                }
                continue;
            };
            if let Some(pt) = point
                && !plugin.points.contains(&pt)
            {
                r.error(&np, msg::plugin_does_not_extend(&p.name, pt.display_name()))
                    .hint(format!(
                        "{} implements {}; enable it there or under multiPoint",
                        p.name,
                        points_of(&p.name)
                    ));
                continue;
            }
            if !seen.insert(p.name.as_str()) {
                let shown = point.map_or("MultiPoint", |p| p.display_name());
                r.error(&np, msg::plugin_already_registered(&p.name, shown))
                    .hint("list each plugin once per extension point");
                continue;
            }
            let weighs =
                |at: ExtensionPoint| plugin.points.contains(&at) && point.is_none_or(|p| p == at);
            let weight_used =
                weighs(ExtensionPoint::Score) || weighs(ExtensionPoint::PlacementScore);
            if let Some(w) = p.weight {
                let wp = child(&pp, "weight");
                if weight_used && w < 0 {
                    r.error(&wp, msg::invalid(&w.to_string(), msg::NEGATIVE_WEIGHT))
                        .hint(msg::NEGATIVE_WEIGHT_FIX);
                } else if !weight_used && w != 0 {
                    r.warn(&wp, format!("weight of {:?} is ignored: weights only apply to Score and PlacementScore plugins at `score`, `placementScore` or `multiPoint`", p.name));
                }
            }
        }
        let dp = child(&sp, "disabled");
        for (i, name) in set.disabled.iter().enumerate() {
            if name.is_empty() || name == "*" || catalog::lookup(name).is_some() {
                continue;
            }
            let w = r.warn(&index(&dp, i), msg::unknown_disabled(name));
            if let Some(why) = catalog::known_but_unsupported(name) {
                w.hint(why);
            } else if let Some(s) = suggest_plugin(name) {
                w.hint(format!("did you mean `{s}`?"));
            }
        }
    }
}

fn plugin_config(r: &mut Report, path: &str, pspec: &ProfileSpec, profile: &Profile) {
    let cp = child(path, "pluginConfig");
    let enabled: HashSet<String> = profile.plugins.enabled_names().into_iter().collect();
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for c in &pspec.plugin_config {
        let ip = index(&cp, c.index);
        if let Some(first) = seen.get(c.name.as_str()) {
            r.error(&ip, msg::duplicate(&format!("{:?}", c.name)))
                .hint(format!(
                    "merge it with pluginConfig[{first}]: one entry per plugin (a legacy hardPodAffinitySymmetricWeight also creates InterPodAffinity args)"
                ));
            continue;
        }
        seen.insert(&c.name, c.index);
        if INVALID_IN_V1.contains(&c.name.as_str()) {
            r.error(
                &ip,
                msg::invalid(&format!("{:?}", c.name), &msg::invalid_in_v1()),
            )
            .hint("this plugin was removed from kube-scheduler; drop the entry");
            continue;
        }
        let known = catalog::lookup(&c.name);
        match &c.args {
            ArgsSpec::Untyped { has_args } => {
                if known.is_some() && *has_args {
                    r.error(&child(&ip, "args"), msg::takes_no_args(&c.name))
                        .hint("remove `args` (or the whole entry)");
                    continue;
                }
            }
            typed => {
                if let Some(args) = default_args(typed) {
                    validate_args(r, &child(&ip, "args"), typed, &args);
                }
            }
        }
        if !enabled.contains(&c.name) {
            // A name no plugin has can never take effect: that is a mistake, not a choice.
            if known.is_none() && catalog::known_but_unsupported(&c.name).is_none() {
                let e = r.error(&child(&ip, "name"), msg::config_unknown_plugin(&c.name));
                match suggest_plugin(&c.name) {
                    Some(s) => e.hint(format!("did you mean `{s}`?")),
                    None => e.hint("name a plugin of `ferrosched config print`, or drop the entry"),
                };
                continue;
            }
            let w = r.warn(&child(&ip, "name"), msg::config_not_enabled(&c.name));
            if known.is_none() {
                if let Some(why) = catalog::known_but_unsupported(&c.name) {
                    w.hint(why);
                }
            } else {
                w.hint(format!(
                    "enable {} under `plugins` or drop this entry",
                    c.name
                ));
            }
        }
    }
}

/// Upstream `validateCommonQueueSort` on the written queueSort sets, then the framework's
/// check that every profile ends up with the same queue sort plugin.
fn common_queue_sort(r: &mut Report, profiles: &[Profile], expanded: &[ExpandedProfile]) {
    let first = &profiles[0];
    let canon = &first.plugins.queue_sort;
    if canon.enabled.len() > 1 {
        r.error(
            "profiles[0].plugins.queueSort.enabled",
            msg::invalid(&canon.enabled.len().to_string(), msg::QUEUE_SORT_ONLY_ONE),
        );
    }
    let qs_name = canon.enabled.first().map(|p| p.name.as_str());
    let qs_args = qs_name.and_then(|n| first.args(n));
    let mut reported = false;
    for (i, p) in profiles.iter().enumerate().skip(1) {
        if &p.plugins.queue_sort != canon {
            reported = true;
            r.error(
                &format!("profiles[{i}].plugins.queueSort"),
                msg::QUEUE_SORT_SAME,
            )
            .hint(msg::QUEUE_SORT_FIX);
        }
        if let Some(n) = qs_name
            && p.plugin_config.iter().any(|c| c.name == n)
            && p.args(n) != qs_args
        {
            r.error(
                &format!("profiles[{i}].pluginConfig"),
                msg::QUEUE_SORT_ARGS_SAME,
            )
            .hint(msg::QUEUE_SORT_FIX);
        }
    }
    if reported || expanded.len() != profiles.len() {
        return;
    }
    let first_qs = expanded[0].plugins_at(ExtensionPoint::QueueSort).first();
    for (i, e) in expanded.iter().enumerate().skip(1) {
        let qs = e.plugins_at(ExtensionPoint::QueueSort).first();
        if let (Some(a), Some(b)) = (first_qs, qs)
            && a != b
        {
            r.error(
                &format!("profiles[{i}].plugins"),
                msg::different_queue_sort(&e.scheduler_name, b, a),
            )
            .hint(msg::QUEUE_SORT_FIX);
        }
    }
}
