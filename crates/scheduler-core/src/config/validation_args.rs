//! Plugin args rules (upstream `validation_pluginargs.go`), run on defaulted args.

use std::collections::HashSet;

use k8s_openapi::api::core::v1::{NodeSelectorRequirement, NodeSelectorTerm};

use super::messages as msg;
use super::spans::{Report, child, index};
use super::spec::ArgsSpec;
use super::types::*;
use crate::k8s_names::{label_value_errors, qualified_name_errors};

/// Highest score a shape point may give (upstream `MaxCustomPriorityScore`).
pub const MAX_CUSTOM_PRIORITY_SCORE: i32 = 10;

pub(crate) fn validate_args(r: &mut Report, path: &str, spec: &ArgsSpec, args: &PluginArgs) {
    match args {
        PluginArgs::Coscheduling(a) => coscheduling(r, path, a),
        PluginArgs::DefaultPreemption(a) => default_preemption(r, path, a),
        PluginArgs::InterPodAffinity(a) => {
            let w = a.hard_pod_affinity_weight;
            if !(0..=100).contains(&w) {
                r.error(
                    &child(path, "hardPodAffinityWeight"),
                    msg::invalid(&w.to_string(), "not in valid range [0, 100]"),
                );
            }
        }
        PluginArgs::NodeAffinity(a) => node_affinity(r, path, a),
        PluginArgs::NodeResourcesBalancedAllocation(a) => balanced_allocation(r, path, a),
        PluginArgs::NodeResourcesFit(a) => fit(r, path, a),
        PluginArgs::PodTopologySpread(a) => pod_topology_spread(r, path, a),
        PluginArgs::VolumeBinding(a) => {
            if a.bind_timeout_seconds < 0 {
                r.error(
                    &child(path, "bindTimeoutSeconds"),
                    msg::invalid(
                        &a.bind_timeout_seconds.to_string(),
                        "invalid BindTimeoutSeconds, should not be a negative value",
                    ),
                )
                .hint("use 0 (do not wait) or a positive number of seconds");
            }
            // Only a written shape can be wrong; the default is valid.
            if let ArgsSpec::VolumeBinding { shape: Some(_), .. } = spec {
                let before = r.error_count();
                function_shape(r, &child(path, "shape"), &a.shape);
                r.hint_new_errors(before, msg::SHAPE_FIX);
            }
        }
        PluginArgs::DynamicResources(a) => {
            // Negative values were reported while decoding; here only (0, 1s) is left.
            if let ArgsSpec::DynamicResources {
                binding_timeout: Some(_),
                ..
            } = spec
                && a.binding_timeout < std::time::Duration::from_secs(1)
            {
                r.error(
                    &child(path, "bindingTimeout"),
                    msg::invalid(
                        &format!("{:?}", super::format_go_duration(a.binding_timeout)),
                        msg::BINDING_TIMEOUT_RANGE,
                    ),
                )
                .hint(msg::FIX_DRA_TIMEOUT);
            }
        }
    }
}

/// scheduler-plugins refuses negative durations and a percentage outside 0-100.
fn coscheduling(r: &mut Report, path: &str, a: &CoschedulingArgs) {
    let pct = a.pod_group_reject_percentage;
    if !(0..=100).contains(&pct) {
        r.error(
            &child(path, "podGroupRejectPercentage"),
            msg::invalid(&pct.to_string(), "must be between 0 and 100"),
        )
        .hint("write a percentage of minMember, 0 to 100");
    }
    for (field, v) in [
        ("permitWaitingTimeSeconds", a.permit_waiting_time_seconds),
        ("podGroupBackoffSeconds", a.pod_group_backoff_seconds),
    ] {
        if v < 0 {
            r.error(
                &child(path, field),
                msg::invalid(&v.to_string(), "must be greater than or equal to 0"),
            )
            .hint("write a number of seconds, 0 or more");
        }
    }
}

fn default_preemption(r: &mut Report, path: &str, a: &DefaultPreemptionArgs) {
    let pp = child(path, "minCandidateNodesPercentage");
    let ap = child(path, "minCandidateNodesAbsolute");
    let (pct, abs) = (
        a.min_candidate_nodes_percentage,
        a.min_candidate_nodes_absolute,
    );
    if !(0..=100).contains(&pct) {
        r.error(
            &pp,
            msg::invalid(&pct.to_string(), "not in valid range [0, 100]"),
        );
    }
    if abs < 0 {
        r.error(
            &ap,
            msg::invalid(&abs.to_string(), "not in valid range [0, inf)"),
        );
    }
    if pct == 0 && abs == 0 {
        r.error(
            &pp,
            msg::invalid("0", "cannot be zero at the same time as minCandidateNodesAbsolute"),
        )
        .hint("set at least one of minCandidateNodesPercentage / minCandidateNodesAbsolute above zero");
        r.error(
            &ap,
            msg::invalid(
                "0",
                "cannot be zero at the same time as minCandidateNodesPercentage",
            ),
        );
    }
}

fn label_name(r: &mut Report, path: &str, value: &str) {
    let errs = qualified_name_errors(value);
    if !errs.is_empty() {
        r.error(path, msg::invalid(&format!("{value:?}"), &errs.join("; ")));
    }
}

fn node_affinity(r: &mut Report, path: &str, a: &NodeAffinityArgs) {
    let Some(aff) = &a.added_affinity else {
        return;
    };
    let base = child(path, "addedAffinity");
    if let Some(sel) = &aff.required_during_scheduling_ignored_during_execution {
        let tp = child(
            &child(&base, "requiredDuringSchedulingIgnoredDuringExecution"),
            "nodeSelectorTerms",
        );
        for (i, term) in sel.node_selector_terms.iter().enumerate() {
            selector_term(r, &index(&tp, i), term);
        }
    }
    if let Some(prefs) = &aff.preferred_during_scheduling_ignored_during_execution {
        let pp = child(&base, "preferredDuringSchedulingIgnoredDuringExecution");
        for (i, pref) in prefs.iter().enumerate() {
            // Zero-weight terms are skipped by the scheduler, so upstream does not check them.
            if pref.weight == 0 {
                continue;
            }
            selector_term(r, &child(&index(&pp, i), "preference"), &pref.preference);
        }
    }
}

fn selector_term(r: &mut Report, path: &str, term: &NodeSelectorTerm) {
    let exprs = term.match_expressions.as_deref().unwrap_or(&[]);
    let fields = term.match_fields.as_deref().unwrap_or(&[]);
    for (i, req) in exprs.iter().enumerate() {
        label_requirement(r, &index(&child(path, "matchExpressions"), i), req);
    }
    for (i, req) in fields.iter().enumerate() {
        field_requirement(r, &index(&child(path, "matchFields"), i), req);
    }
}

const LABEL_OPERATORS: &[&str] = &["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"];

fn label_requirement(r: &mut Report, path: &str, req: &NodeSelectorRequirement) {
    let op = req.operator.as_str();
    if !LABEL_OPERATORS.contains(&op) {
        r.error(
            &child(path, "operator"),
            msg::not_supported(op, LABEL_OPERATORS),
        );
        return;
    }
    label_name(r, &child(path, "key"), &req.key);
    let values = req.values.as_deref().unwrap_or(&[]);
    let vp = child(path, "values");
    let shown = format!("{values:?}");
    match op {
        "In" | "NotIn" if values.is_empty() => {
            r.error(
                &vp,
                msg::invalid(
                    &shown,
                    "for 'in', 'notin' operators, values set can't be empty",
                ),
            );
        }
        "Exists" | "DoesNotExist" if !values.is_empty() => {
            r.error(
                &vp,
                msg::invalid(
                    &shown,
                    "values set must be empty for exists and does not exist",
                ),
            )
            .hint("remove `values`");
        }
        "Gt" | "Lt" => {
            if values.len() != 1 {
                r.error(
                    &vp,
                    msg::invalid(
                        &shown,
                        "for 'Gt', 'Lt' operators, exactly one value is required",
                    ),
                );
            }
            for (i, v) in values.iter().enumerate() {
                if v.parse::<i64>().is_err() {
                    r.error(
                        &index(&vp, i),
                        msg::invalid(
                            &format!("{v:?}"),
                            "for 'Gt', 'Lt' operators, the value must be an integer",
                        ),
                    );
                }
            }
        }
        _ => {}
    }
    for (i, v) in values.iter().enumerate() {
        let errs = label_value_errors(v);
        if !errs.is_empty() {
            r.error(
                &index(&vp, i),
                msg::invalid(&format!("{v:?}"), &errs.join("; ")),
            );
        }
    }
}

fn field_requirement(r: &mut Report, path: &str, req: &NodeSelectorRequirement) {
    let op = req.operator.as_str();
    let values = req.values.as_deref().unwrap_or(&[]);
    match op {
        "In" | "NotIn" => {
            if values.len() != 1 {
                r.error(
                    &child(path, "values"),
                    msg::invalid(&format!("{values:?}"), "must have one element"),
                );
            }
        }
        _ => {
            r.error(
                &child(path, "operator"),
                msg::not_supported(op, &["In", "NotIn"]),
            );
        }
    }
    // Nodes expose only this field to selectors; any other key would never match.
    if req.key != "metadata.name" {
        r.error(
            &child(path, "key"),
            msg::not_supported(&req.key, &["metadata.name"]),
        )
        .hint("matchFields can only select nodes by name; use matchExpressions for labels");
    }
}

fn balanced_allocation(r: &mut Report, path: &str, a: &NodeResourcesBalancedAllocationArgs) {
    let mut seen = HashSet::new();
    let rp = child(path, "resources");
    for (i, res) in a.resources.iter().enumerate() {
        let ip = index(&rp, i);
        if !seen.insert(res.name.as_str()) {
            r.error(
                &child(&ip, "name"),
                msg::duplicate(&format!("{:?}", res.name)),
            );
        }
        if res.weight != 1 {
            r.error(&child(&ip, "weight"), msg::invalid(&res.weight.to_string(), "must be 1"))
                .hint("NodeResourcesBalancedAllocation weighs every resource equally; drop `weight` or set it to 1");
        }
    }
}

fn fit(r: &mut Report, path: &str, a: &NodeResourcesFitArgs) {
    let ip = child(path, "ignoredResources");
    for (i, res) in a.ignored_resources.iter().enumerate() {
        label_name(r, &index(&ip, i), res);
    }
    let gp = child(path, "ignoredResourceGroups");
    for (i, g) in a.ignored_resource_groups.iter().enumerate() {
        let p = index(&gp, i);
        if g.contains('/') {
            r.error(&p, msg::invalid(&format!("{g:?}"), "resource group name can't contain '/'"))
                .hint("give only the group, e.g. `example.com` to ignore every `example.com/...` resource");
        }
        label_name(r, &p, g);
    }
    let sp = child(path, "scoringStrategy");
    let Some(s) = &a.scoring_strategy else {
        r.error(&sp, msg::required("ScoringStrategy field is required"));
        return;
    };
    let rp = child(&sp, "resources");
    for (i, res) in s.resources.iter().enumerate() {
        let p = index(&rp, i);
        if res.name.is_empty() {
            r.error(&child(&p, "name"), msg::required(""));
        } else {
            label_name(r, &child(&p, "name"), &res.name);
        }
        if res.weight <= 0 || res.weight > 100 {
            r.error(
                &child(&p, "weight"),
                msg::invalid(
                    &res.weight.to_string(),
                    &format!(
                        "resource weight of {} not in valid range (0, 100]",
                        res.name
                    ),
                ),
            );
        }
    }
    let rtcr = child(&sp, "requestedToCapacityRatio");
    if s.type_ == ScoringStrategyType::RequestedToCapacityRatio {
        match &s.requested_to_capacity_ratio {
            None => {
                r.error(&rtcr, msg::required("must be specified when type is RequestedToCapacityRatio"))
                    .hint("add `requestedToCapacityRatio: {shape: [{utilization: 0, score: 0}, {utilization: 100, score: 10}]}`");
            }
            Some(p) => function_shape(r, &child(&rtcr, "shape"), &p.shape),
        }
    } else if s.requested_to_capacity_ratio.is_some() {
        r.error(
            &rtcr,
            msg::forbidden("must be nil when type is not RequestedToCapacityRatio"),
        )
        .hint("remove `requestedToCapacityRatio` or set `type: RequestedToCapacityRatio`");
    }
}

fn function_shape(r: &mut Report, path: &str, shape: &[UtilizationShapePoint]) {
    if shape.is_empty() {
        r.error(path, msg::required("at least one point must be specified"));
        return;
    }
    for i in 1..shape.len() {
        if shape[i - 1].utilization >= shape[i].utilization {
            r.error(
                &child(&index(path, i), "utilization"),
                msg::invalid(
                    &shape[i].utilization.to_string(),
                    "values must be sorted in increasing order",
                ),
            );
            break;
        }
    }
    for (i, pt) in shape.iter().enumerate() {
        let p = index(path, i);
        if !(0..=100).contains(&pt.utilization) {
            r.error(
                &child(&p, "utilization"),
                msg::invalid(&pt.utilization.to_string(), "not in valid range [0, 100]"),
            );
        }
        if !(0..=MAX_CUSTOM_PRIORITY_SCORE).contains(&pt.score) {
            r.error(
                &child(&p, "score"),
                msg::invalid(
                    &pt.score.to_string(),
                    &format!("not in valid range [0, {MAX_CUSTOM_PRIORITY_SCORE}]"),
                ),
            );
        }
    }
}

fn pod_topology_spread(r: &mut Report, path: &str, a: &PodTopologySpreadArgs) {
    if a.defaulting_type == PodTopologySpreadConstraintsDefaulting::System
        && !a.default_constraints.is_empty()
    {
        r.error(
            &child(path, "defaultingType"),
            msg::invalid("\"System\"", "when .defaultConstraints are not empty"),
        )
        .hint("set `defaultingType: List` to use your defaultConstraints, or remove them");
    }
    let cp = child(path, "defaultConstraints");
    for (i, c) in a.default_constraints.iter().enumerate() {
        let p = index(&cp, i);
        if c.max_skew <= 0 {
            r.error(
                &child(&p, "maxSkew"),
                msg::invalid(&c.max_skew.to_string(), "not in valid range (0, inf)"),
            );
        }
        if c.topology_key.is_empty() {
            r.error(&child(&p, "topologyKey"), msg::required("can not be empty"));
        } else {
            label_name(r, &child(&p, "topologyKey"), &c.topology_key);
        }
        let wp = child(&p, "whenUnsatisfiable");
        match c.when_unsatisfiable.as_str() {
            "" => {
                r.error(&wp, msg::required("can not be empty"));
            }
            "DoNotSchedule" | "ScheduleAnyway" => {}
            other => {
                r.error(
                    &wp,
                    msg::not_supported(other, &["DoNotSchedule", "ScheduleAnyway"]),
                );
            }
        }
        if c.label_selector.is_some() {
            r.error(
                &child(&p, "labelSelector"),
                msg::forbidden("constraint must not define a selector, as they deduced for each pod"),
            )
            .hint("remove labelSelector: default constraints select the pod's own Service/ReplicaSet/StatefulSet peers");
        }
        if a.default_constraints[..i].iter().any(|o| {
            o.topology_key == c.topology_key && o.when_unsatisfiable == c.when_unsatisfiable
        }) {
            r.error(
                &p,
                msg::duplicate(&format!(
                    "\"{{{}, {}}}\"",
                    c.topology_key, c.when_unsatisfiable
                )),
            );
        }
    }
}
