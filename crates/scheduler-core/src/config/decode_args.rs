//! `pluginConfig[].args`, typed by the plugin's name through the catalog.

use std::time::Duration;

use k8s_openapi::api::core::v1::{NodeAffinity, TopologySpreadConstraint};

use crate::plugins::catalog;

use super::decode::{Obj, field};
use super::duration::parse_go_duration;
use super::k8s_schema::{self, NODE_AFFINITY, TOPOLOGY_SPREAD_CONSTRAINT, is_non_empty};
use super::messages as msg;
use super::spans::{Report, index};
use super::spec::ArgsSpec;
use super::suggest::quoted_list;
use super::types::{
    API_VERSION, LEGACY_API_VERSION, NodeAffinityArgs, NodeResourcesBalancedAllocationArgs,
    NodeResourcesFitArgs, PodTopologySpreadConstraintsDefaulting, RequestedToCapacityRatioParam,
    ResourceSpec, ScoringStrategy, ScoringStrategyType, UtilizationShapePoint,
};
use super::yaml_tree::{Node, Value};

fn fields_of(kind: &str) -> &'static [&'static str] {
    match kind {
        "CoschedulingArgs" => &[
            "apiVersion",
            "kind",
            "permitWaitingTimeSeconds",
            "podGroupBackoffSeconds",
            "podGroupRejectPercentage",
        ],
        "DefaultPreemptionArgs" => &[
            "apiVersion",
            "kind",
            "minCandidateNodesPercentage",
            "minCandidateNodesAbsolute",
        ],
        "DynamicResourcesArgs" => &["apiVersion", "kind", "filterTimeout", "bindingTimeout"],
        "InterPodAffinityArgs" => &[
            "apiVersion",
            "kind",
            "hardPodAffinityWeight",
            "ignorePreferredTermsOfExistingPods",
        ],
        "NodeAffinityArgs" => &["apiVersion", "kind", "addedAffinity"],
        "NodeResourcesBalancedAllocationArgs" => &["apiVersion", "kind", "resources"],
        "NodeResourcesFitArgs" => &[
            "apiVersion",
            "kind",
            "ignoredResources",
            "ignoredResourceGroups",
            "scoringStrategy",
        ],
        "PodTopologySpreadArgs" => &["apiVersion", "kind", "defaultConstraints", "defaultingType"],
        "VolumeBindingArgs" => &["apiVersion", "kind", "bindTimeoutSeconds", "shape"],
        _ => &["apiVersion", "kind"],
    }
}

pub(crate) fn decode_args(
    r: &mut Report,
    plugin: &str,
    node: Option<&Node>,
    path: &str,
    legacy: bool,
) -> ArgsSpec {
    let Some(kind) = catalog::lookup(plugin).and_then(|s| s.args_kind) else {
        return ArgsSpec::Untyped {
            has_args: node.is_some_and(is_non_empty),
        };
    };
    let empty = ArgsSpec::empty(kind).expect("catalog args kinds are all known");
    let Some(node) = node else {
        return empty;
    };
    let Some(o) = r.object(node, path, fields_of(kind)) else {
        return empty;
    };
    check_type_meta(r, &o, plugin, kind, legacy);
    match kind {
        "CoschedulingArgs" => ArgsSpec::Coscheduling {
            permit_waiting_time_seconds: field!(r, o, "permitWaitingTimeSeconds", int64),
            pod_group_backoff_seconds: field!(r, o, "podGroupBackoffSeconds", int64),
            pod_group_reject_percentage: field!(r, o, "podGroupRejectPercentage", int32),
        },
        "DefaultPreemptionArgs" => ArgsSpec::DefaultPreemption {
            min_candidate_nodes_percentage: field!(r, o, "minCandidateNodesPercentage", int32),
            min_candidate_nodes_absolute: field!(r, o, "minCandidateNodesAbsolute", int32),
        },
        "DynamicResourcesArgs" => ArgsSpec::DynamicResources {
            filter_timeout: o.get("filterTimeout").and_then(|n| {
                let p = o.path("filterTimeout");
                signed_duration(r, n, &p, msg::FILTER_TIMEOUT_RANGE)
            }),
            binding_timeout: o.get("bindingTimeout").and_then(|n| {
                let p = o.path("bindingTimeout");
                signed_duration(r, n, &p, msg::BINDING_TIMEOUT_RANGE)
            }),
        },
        "InterPodAffinityArgs" => ArgsSpec::InterPodAffinity {
            hard_pod_affinity_weight: field!(r, o, "hardPodAffinityWeight", int32),
            ignore_preferred_terms_of_existing_pods: field!(
                r,
                o,
                "ignorePreferredTermsOfExistingPods",
                boolean
            )
            .unwrap_or(false),
        },
        "NodeAffinityArgs" => {
            let added_affinity = o.get("addedAffinity").and_then(|n| {
                let p = o.path("addedAffinity");
                if k8s_schema::check(r, n, &p, NODE_AFFINITY) {
                    k8s_schema::convert::<NodeAffinity>(r, n, &p, "NodeAffinity")
                } else {
                    None
                }
            });
            ArgsSpec::NodeAffinity(NodeAffinityArgs { added_affinity })
        }
        "NodeResourcesBalancedAllocationArgs" => {
            ArgsSpec::NodeResourcesBalancedAllocation(NodeResourcesBalancedAllocationArgs {
                resources: o
                    .get("resources")
                    .map(|n| resources(r, n, &o.path("resources")))
                    .unwrap_or_default(),
            })
        }
        "NodeResourcesFitArgs" => ArgsSpec::NodeResourcesFit(NodeResourcesFitArgs {
            ignored_resources: o
                .get("ignoredResources")
                .map(|n| r.string_list(n, &o.path("ignoredResources")))
                .unwrap_or_default(),
            ignored_resource_groups: o
                .get("ignoredResourceGroups")
                .map(|n| r.string_list(n, &o.path("ignoredResourceGroups")))
                .unwrap_or_default(),
            scoring_strategy: o
                .get("scoringStrategy")
                .and_then(|n| scoring_strategy(r, n, &o.path("scoringStrategy"))),
        }),
        "PodTopologySpreadArgs" => {
            let mut default_constraints = Vec::new();
            if let Some(n) = o.get("defaultConstraints") {
                let lp = o.path("defaultConstraints");
                if let Some(items) = r.list(n, &lp) {
                    for (i, item) in items.iter().enumerate() {
                        let ip = index(&lp, i);
                        if k8s_schema::check(r, item, &ip, TOPOLOGY_SPREAD_CONSTRAINT)
                            && let Some(c) = k8s_schema::convert::<TopologySpreadConstraint>(
                                r,
                                item,
                                &ip,
                                "TopologySpreadConstraint",
                            )
                        {
                            default_constraints.push(c);
                        }
                    }
                }
            }
            let defaulting_type = match o.get("defaultingType") {
                None => None,
                Some(n) => {
                    let p = o.path("defaultingType");
                    match r.string(n, &p).as_deref() {
                        Some("System") => Some(PodTopologySpreadConstraintsDefaulting::System),
                        Some("List") => Some(PodTopologySpreadConstraintsDefaulting::List),
                        // Empty means "default it", as upstream.
                        Some("") => None,
                        Some(other) => {
                            r.error(&p, msg::not_supported(other, &["List", "System"]))
                                .hint("use `System` (Kubernetes' built-in spreading) or `List` (the constraints in defaultConstraints)");
                            None
                        }
                        None => None,
                    }
                }
            };
            ArgsSpec::PodTopologySpread {
                default_constraints,
                defaulting_type,
            }
        }
        "VolumeBindingArgs" => ArgsSpec::VolumeBinding {
            bind_timeout_seconds: field!(r, o, "bindTimeoutSeconds", int64),
            // `shape: []` counts as set, as upstream.
            shape: o.get("shape").map(|n| shape(r, n, &o.path("shape"))),
        },
        _ => empty,
    }
}

/// A metav1.Duration that may be written negative: upstream decodes `-1s` and rejects it in
/// validation with `range_rule`, so it is reported here with that message.
fn signed_duration(r: &mut Report, node: &Node, path: &str, range_rule: &str) -> Option<Duration> {
    if let Value::Str(text) = &node.value
        && let Some(body) = text.trim().strip_prefix('-')
        && let Ok(d) = parse_go_duration(body)
        && !d.is_zero()
    {
        r.error(path, msg::invalid(&format!("{text:?}"), range_rule))
            .hint(msg::FIX_DRA_TIMEOUT);
        return None;
    }
    r.duration(node, path)
}

fn check_type_meta(r: &mut Report, o: &Obj<'_>, plugin: &str, kind: &str, legacy: bool) {
    if let Some(n) = o.get("kind") {
        let p = o.path("kind");
        if let Some(k) = r.string(n, &p)
            && k != kind
        {
            r.error(
                &p,
                msg::invalid(
                    &format!("{k:?}"),
                    &msg::args_kind_mismatch(plugin, kind, &k),
                ),
            )
            .hint(format!(
                "set `kind: {kind}` or remove `kind` (it is optional)"
            ));
        }
    }
    if let Some(n) = o.get("apiVersion") {
        let p = o.path("apiVersion");
        if let Some(v) = r.string(n, &p) {
            let ok = v == API_VERSION || (legacy && v == LEGACY_API_VERSION);
            if !ok {
                r.error(&p, msg::not_supported(&v, &[API_VERSION]))
                    .hint(format!(
                        "set `apiVersion: {API_VERSION}` or remove `apiVersion` (it is optional)"
                    ));
            }
        }
    }
}

fn resources(r: &mut Report, node: &Node, path: &str) -> Vec<ResourceSpec> {
    let Some(items) = r.list(node, path) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let ip = index(path, i);
        if let Some(o) = r.object(item, &ip, &["name", "weight"]) {
            out.push(ResourceSpec {
                name: field!(r, o, "name", string).unwrap_or_default(),
                weight: field!(r, o, "weight", int64).unwrap_or(0),
            });
        }
    }
    out
}

fn shape(r: &mut Report, node: &Node, path: &str) -> Vec<UtilizationShapePoint> {
    let Some(items) = r.list(node, path) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let ip = index(path, i);
        if let Some(o) = r.object(item, &ip, &["utilization", "score"]) {
            out.push(UtilizationShapePoint {
                utilization: field!(r, o, "utilization", int32).unwrap_or(0),
                score: field!(r, o, "score", int32).unwrap_or(0),
            });
        }
    }
    out
}

fn scoring_strategy(r: &mut Report, node: &Node, path: &str) -> Option<ScoringStrategy> {
    let o = r.object(
        node,
        path,
        &["type", "resources", "requestedToCapacityRatio"],
    )?;
    let supported: Vec<&str> = ScoringStrategyType::ALL
        .iter()
        .map(|t| t.as_str())
        .collect();
    let tp = o.path("type");
    // Upstream only defaults the type when the whole strategy is omitted; a strategy
    // without a type is "Unsupported value: \"\"".
    let type_text = match o.get("type") {
        Some(n) => r.string(n, &tp),
        None => Some(String::new()),
    };
    let type_ = match type_text.as_deref() {
        Some(t) => match ScoringStrategyType::ALL.iter().find(|x| x.as_str() == t) {
            Some(x) => *x,
            None => {
                let e = r.error(&tp, msg::not_supported(t, &supported));
                e.hint(format!(
                    "set `type` to one of {}",
                    quoted_list(supported.iter().copied())
                ));
                ScoringStrategyType::LeastAllocated
            }
        },
        None => ScoringStrategyType::LeastAllocated,
    };
    let resources = o
        .get("resources")
        .map(|n| resources(r, n, &o.path("resources")))
        .unwrap_or_default();
    let requested_to_capacity_ratio = o.get("requestedToCapacityRatio").and_then(|n| {
        let p = o.path("requestedToCapacityRatio");
        let ro = r.object(n, &p, &["shape"])?;
        Some(RequestedToCapacityRatioParam {
            shape: ro
                .get("shape")
                .map(|s| shape(r, s, &ro.path("shape")))
                .unwrap_or_default(),
        })
    });
    Some(ScoringStrategy {
        type_,
        resources,
        requested_to_capacity_ratio,
    })
}
