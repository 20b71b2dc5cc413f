//! "What would have to change": for each plugin that rejected nodes, the smallest change to
//! the pod that would let some of those nodes through that plugin. Computed from the
//! rejected nodes after the cycle, only when an explanation is asked for.

use std::collections::BTreeMap;

use super::{Explanation, Hint, Verdict};
use crate::cache::Snapshot;
use crate::plugins::names::{
    NODE_AFFINITY, NODE_RESOURCES_FIT, NODE_UNSCHEDULABLE, RUNTIME_CLASS, TAINT_TOLERATION,
};
use crate::plugins::node_resources_fit;
use crate::plugins::taint_toleration::is_do_not_schedule;
use crate::types::{
    NodeInfo, PodInfo, RESOURCE_CPU, RESOURCE_EPHEMERAL_STORAGE, RESOURCE_MEMORY, RESOURCE_PODS,
    tolerations_tolerate_taint,
};

/// The hints for an unschedulable pod whose verdicts `e` holds, most helpful first within
/// each plugin, plugins in the order of their first rejected node.
pub fn hints(pod: &PodInfo, snapshot: &Snapshot, e: &Explanation) -> Vec<Hint> {
    let mut out = Vec::new();
    if let Some(r) = &e.pre_filter_rejection {
        out.push(Hint {
            plugin: r.plugin.clone().unwrap_or_default(),
            nodes: 0,
            text: format!(
                "rejected before any node was looked at: {}",
                r.reasons.join(", ")
            ),
        });
        return out;
    }
    // Rejected nodes per plugin, in order of first appearance.
    let mut by_plugin: Vec<(String, Vec<&NodeInfo>, BTreeMap<String, usize>)> = Vec::new();
    for v in &e.nodes {
        let Verdict::Rejected(r) = &v.verdict else {
            continue;
        };
        let Some(node) = snapshot.get(&v.node) else {
            continue;
        };
        let plugin = r.plugin.clone().unwrap_or_default();
        let i = match by_plugin.iter().position(|(p, _, _)| *p == plugin) {
            Some(i) => i,
            None => {
                by_plugin.push((plugin, Vec::new(), BTreeMap::new()));
                by_plugin.len() - 1
            }
        };
        by_plugin[i].1.push(node);
        for reason in &r.reasons {
            *by_plugin[i].2.entry(reason.clone()).or_default() += 1;
        }
    }
    for (plugin, nodes, reasons) in by_plugin {
        let before = out.len();
        match plugin.as_str() {
            NODE_RESOURCES_FIT => resources(pod, &nodes, &mut out),
            TAINT_TOLERATION => taints(pod, &nodes, &mut out),
            NODE_AFFINITY => node_selector(pod, snapshot, &mut out),
            RUNTIME_CLASS => runtime_class(pod, snapshot, &nodes, &mut out),
            NODE_UNSCHEDULABLE => out.push(Hint {
                plugin: plugin.clone(),
                nodes: nodes.len(),
                text: format!(
                    "{} if uncordoned (spec.unschedulable), or if the pod tolerated node.kubernetes.io/unschedulable:NoSchedule",
                    count(nodes.len())
                ),
            }),
            _ => {}
        }
        if out.len() == before {
            // No specific advice: say what the plugin needs, with its most frequent reason.
            let top = reasons
                .iter()
                .max_by_key(|(r, n)| (**n, std::cmp::Reverse(*r)))
                .map(|(r, _)| r.as_str())
                .unwrap_or("rejected");
            out.push(Hint {
                plugin: plugin.clone(),
                nodes: nodes.len(),
                text: format!("{} rejected by {plugin}: {top}", count(nodes.len())),
            });
        }
    }
    out
}

/// "1 node has" / "2 nodes have".
fn have(n: usize) -> String {
    format!("{} {}", count(n), if n == 1 { "has" } else { "have" })
}

fn count(n: usize) -> String {
    if n == 1 {
        "1 node".to_string()
    } else {
        format!("{n} nodes")
    }
}

/// For each resource that alone keeps nodes out: the smallest reduction that lets the
/// closest node in, and the one that lets them all in.
fn resources(pod: &PodInfo, nodes: &[&NodeInfo], out: &mut Vec<Hint>) {
    let mut short: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    let mut too_big: BTreeMap<String, usize> = BTreeMap::new();
    let mut several = 0usize;
    for node in nodes {
        let lacks = node_resources_fit::fits(pod, node);
        match lacks.as_slice() {
            [] => {}
            [one] if one.unresolvable => {
                *too_big.entry(one.resource_name.clone()).or_default() += 1
            }
            [one] => short
                .entry(one.resource_name.clone())
                .or_default()
                .push(one.requested + one.used - one.capacity),
            _ => several += 1,
        }
    }
    for (resource, mut shortages) in short {
        shortages.sort_unstable();
        let min = shortages[0];
        let max = shortages[shortages.len() - 1];
        let at_min = shortages.iter().filter(|s| **s <= min).count();
        let text = if resource == RESOURCE_PODS {
            format!(
                "{} reached the pod limit: room for one more pod would let the closest in",
                have(shortages.len())
            )
        } else if max > min {
            format!(
                "{} would fit with {} less {resource} ({} with {} less)",
                count(at_min),
                amount(&resource, min),
                shortages.len(),
                amount(&resource, max)
            )
        } else {
            format!(
                "{} would fit with {} less {resource}",
                count(at_min),
                amount(&resource, min)
            )
        };
        out.push(Hint {
            plugin: NODE_RESOURCES_FIT.to_string(),
            nodes: at_min,
            text,
        });
    }
    for (resource, n) in too_big {
        out.push(Hint {
            plugin: NODE_RESOURCES_FIT.to_string(),
            nodes: n,
            text: format!(
                "the pod asks for more {resource} than {} {} allocatable in total",
                count(n),
                if n == 1 { "has" } else { "have" }
            ),
        });
    }
    if several > 0 {
        out.push(Hint {
            plugin: NODE_RESOURCES_FIT.to_string(),
            nodes: several,
            text: format!("{} too little of more than one resource", have(several)),
        });
    }
}

/// A resource amount as a user would write it.
fn amount(resource: &str, v: i64) -> String {
    match resource {
        RESOURCE_CPU => format!("{v}m"),
        RESOURCE_MEMORY | RESOURCE_EPHEMERAL_STORAGE => bytes(v),
        _ if resource.starts_with("hugepages-") => bytes(v),
        _ => v.to_string(),
    }
}

fn bytes(v: i64) -> String {
    const UNITS: [(&str, i64); 4] = [
        ("Ti", 1 << 40),
        ("Gi", 1 << 30),
        ("Mi", 1 << 20),
        ("Ki", 1 << 10),
    ];
    for (suffix, size) in UNITS {
        if v >= size && v % size == 0 {
            return format!("{}{suffix}", v / size);
        }
    }
    // Round up so that the reduction named is always enough.
    if v > 1 << 20 {
        return format!("{}Mi", (v + (1 << 20) - 1) >> 20);
    }
    v.to_string()
}

/// Nodes kept out by exactly one taint: tolerating it lets them through.
fn taints(pod: &PodInfo, nodes: &[&NodeInfo], out: &mut Vec<Hint>) {
    let mut by_taint: BTreeMap<String, usize> = BTreeMap::new();
    let mut several = 0;
    for node in nodes {
        let untolerated: Vec<_> = node
            .taints
            .iter()
            .filter(|t| is_do_not_schedule(t) && !tolerations_tolerate_taint(&pod.tolerations, t))
            .collect();
        match untolerated.as_slice() {
            [] => {}
            [t] => {
                let name = if t.value.is_empty() {
                    format!("{}:{}", t.key, t.effect)
                } else {
                    format!("{}={}:{}", t.key, t.value, t.effect)
                };
                *by_taint.entry(name).or_default() += 1;
            }
            _ => several += 1,
        }
    }
    let mut v: Vec<(String, usize)> = by_taint.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    for (taint, n) in v {
        out.push(Hint {
            plugin: TAINT_TOLERATION.to_string(),
            nodes: n,
            text: format!("{} if the pod tolerated {taint}", count(n)),
        });
    }
    if several > 0 {
        out.push(Hint {
            plugin: TAINT_TOLERATION.to_string(),
            nodes: several,
            text: format!("{} more than one untolerated taint", have(several)),
        });
    }
}

/// nodeSelector labels no node carries at all.
fn node_selector(pod: &PodInfo, snapshot: &Snapshot, out: &mut Vec<Hint>) {
    for (k, v) in &pod.node_selector {
        let n = snapshot
            .node_infos()
            .iter()
            .filter(|n| n.labels.get(k) == Some(v))
            .count();
        if n == 0 {
            out.push(Hint {
                plugin: NODE_AFFINITY.to_string(),
                nodes: 0,
                text: format!("no node has label {k}={v}"),
            });
        }
    }
}

/// Nodes without the labels the pod's RuntimeClass selects.
fn runtime_class(pod: &PodInfo, snapshot: &Snapshot, nodes: &[&NodeInfo], out: &mut Vec<Hint>) {
    let Some(class) = pod
        .runtime_class_name
        .as_deref()
        .and_then(|n| snapshot.runtime_class(n))
    else {
        return;
    };
    let labels: Vec<String> = class
        .node_selector
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    if labels.is_empty() {
        return;
    }
    out.push(Hint {
        plugin: RUNTIME_CLASS.to_string(),
        nodes: nodes.len(),
        text: format!(
            "{} lack the label(s) {} that RuntimeClass {} selects; only nodes with them can run the pod",
            count(nodes.len()),
            labels.join(", "),
            class.name
        ),
    });
}
