//! The human-readable form of an [`Explanation`]: one table per pod, nodes as rows and
//! plugins as columns (the reject reason, or the weighted score, in each cell), then the
//! selection, preemption and what would have to change. Long node lists keep the best
//! scored and the closest rejected nodes and summarise the rest.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::group::{DomainResult, GroupExplanation, GroupPolicyName, GroupResult, MemberResult};
use super::{Explanation, NodeVerdict, Outcome, PreemptionOutcome, Verdict};

/// Rows kept of each kind (scored, rejected) before the rest is summarised.
pub const DEFAULT_MAX_ROWS: usize = 20;

/// Cell of a filter plugin a node passed, and of one that never ran on it.
const PASSED: &str = "ok";
const NOT_RUN: &str = "-";

/// Renders `e`; at most `max_rows` scored and `max_rows` rejected nodes are listed.
pub fn render(e: &Explanation, max_rows: usize) -> String {
    let mut out = String::new();
    if let Some(g) = &e.group {
        out.push_str(&group(g, max_rows));
        out.push('\n');
    }
    let outcome = match e.outcome {
        Outcome::Scheduled => format!("scheduled on {}", e.node.as_deref().unwrap_or("?")),
        Outcome::Unschedulable => "unschedulable".to_string(),
        Outcome::Error => "error".to_string(),
    };
    let _ = writeln!(out, "{} (profile {}): {outcome}", e.pod, e.profile);
    if let Some(m) = &e.message {
        let _ = writeln!(out, "  {m}");
    }
    if let Some(g) = &e.group
        && e.nodes.is_empty()
    {
        let why = if g.outcome == GroupResult::Waiting {
            "it waits at PreEnqueue, before any cycle"
        } else {
            "the group cycle stopped before trying it"
        };
        let _ = writeln!(out, "  No node was evaluated for this pod: {why}.");
    }

    // Columns: the filter plugins that rejected some node, then the score plugins.
    let rejecting: Vec<&str> = e
        .filter_plugins
        .iter()
        .map(String::as_str)
        .filter(|p| {
            e.nodes.iter().any(
                |n| matches!(&n.verdict, Verdict::Rejected(r) if r.plugin.as_deref() == Some(*p)),
            )
        })
        .collect();
    let mut header: Vec<String> = vec!["NODE".to_string()];
    header.extend(rejecting.iter().map(|p| format!("{p}(filter)")));
    header.extend(
        e.score_plugins
            .iter()
            .map(|p| format!("{}(x{})", p.name, p.weight)),
    );
    if !e.scores.is_empty() {
        header.push("TOTAL".to_string());
    }

    let (rows, summary) = pick_rows(e, max_rows);
    let mut table: Vec<Vec<String>> = vec![header];
    for n in rows {
        table.push(row(e, n, &rejecting));
    }
    if e.pre_filter_rejection.is_none() && table.len() > 1 {
        out.push('\n');
        out.push_str(&columns(&table));
    }
    for s in summary {
        let _ = writeln!(out, "  {s}");
    }

    if let Some(r) = &e.pre_filter_rejection {
        let _ = writeln!(
            out,
            "\nPreFilter {} rejected the pod for every node: {}",
            r.plugin.as_deref().unwrap_or("?"),
            r.reasons.join(", ")
        );
    }
    if let Some(sel) = &e.selection {
        let mut line = format!("\nChosen: {}", sel.chosen);
        if let Some(t) = sel.chosen_total {
            let _ = write!(line, " (total {t})");
        }
        if let (Some(r), Some(t), Some(m)) = (&sel.runner_up, sel.runner_up_total, sel.margin) {
            let _ = write!(line, "; runner-up {r} (total {t}), margin {m}");
        }
        let _ = write!(line, "; {}", sel.how);
        if !sel.tied.is_empty() {
            let _ = write!(line, " among {}", sel.tied.join(", "));
        }
        let _ = writeln!(out, "{line}.");
    }
    if let Some(r) = &e.after_filter_rejection {
        let _ = writeln!(
            out,
            "Then turned down by {}: {}",
            r.plugin.as_deref().unwrap_or("?"),
            r.reasons.join(", ")
        );
    }
    if let Some(p) = &e.preemption {
        out.push_str(&preemption(p));
    }
    if !e.hints.is_empty() {
        let _ = writeln!(out, "\nWhat would change it:");
        for h in &e.hints {
            let _ = writeln!(out, "  {}: {}", h.plugin, h.text);
        }
    }
    out
}

/// The group section: who the group is, what its cycle decided, each member, each domain.
fn group(g: &GroupExplanation, max_rows: usize) -> String {
    let mut out = String::new();
    let what = match &g.api_version {
        Some(v) => format!("PodGroup {v}"),
        None => g.api.clone(),
    };
    let quorum = if g.api.ends_with("x-k8s.io") {
        "minMember"
    } else {
        "minCount"
    };
    let policy = match (g.policy, g.min_count) {
        (Some(GroupPolicyName::Gang), Some(n)) => format!("gang, {quorum} {n}"),
        (Some(GroupPolicyName::Gang), None) => "gang".to_string(),
        (Some(GroupPolicyName::Basic), _) => "basic".to_string(),
        (None, _) => "not found".to_string(),
    };
    let topology = g
        .topology_key
        .as_ref()
        .map(|k| format!(", topology {k}"))
        .unwrap_or_default();
    let outcome = match g.outcome {
        GroupResult::Placed => "placed",
        GroupResult::Unschedulable => "unschedulable",
        GroupResult::Error => "error",
        GroupResult::Waiting => "waiting at PreEnqueue",
        GroupResult::PodByPod => "scheduled pod by pod",
    };
    let _ = writeln!(
        out,
        "Pod group {} ({what}, {policy}{topology}): {outcome}",
        g.pod_group
    );
    if let Some(m) = &g.message {
        let _ = writeln!(out, "  {m}");
    }
    let _ = writeln!(
        out,
        "  Pods: {} tried in this cycle, {} placed before, {} in all.",
        g.pods.queued, g.pods.scheduled, g.pods.total
    );

    if !g.members.is_empty() {
        let mut rows = vec![vec![
            "MEMBER".to_string(),
            "RESULT".to_string(),
            "NODE".to_string(),
            "MESSAGE".to_string(),
        ]];
        for m in g.members.iter().take(max_rows) {
            let (result, message) = match m.result {
                MemberResult::Placed => ("placed", String::new()),
                MemberResult::Fitted => (
                    "fitted",
                    "fits; undone: the group was not placed".to_string(),
                ),
                MemberResult::Unschedulable => {
                    ("unschedulable", m.message.clone().unwrap_or_default())
                }
                MemberResult::NotTried => ("not tried", m.message.clone().unwrap_or_default()),
                MemberResult::Error => ("error", m.message.clone().unwrap_or_default()),
            };
            rows.push(vec![
                m.pod.clone(),
                result.to_string(),
                m.node.clone().unwrap_or_else(|| NOT_RUN.to_string()),
                message,
            ]);
        }
        out.push('\n');
        out.push_str(&columns(&rows));
        if g.members.len() > max_rows {
            let mut left: BTreeMap<&str, usize> = BTreeMap::new();
            for m in &g.members[max_rows..] {
                let r = match m.result {
                    MemberResult::Placed => "placed",
                    MemberResult::Fitted => "fitted",
                    MemberResult::Unschedulable => "unschedulable",
                    MemberResult::NotTried => "not tried",
                    MemberResult::Error => "error",
                };
                *left.entry(r).or_default() += 1;
            }
            let parts: Vec<String> = left.iter().map(|(r, n)| format!("{n} {r}")).collect();
            let _ = writeln!(
                out,
                "  ... and {} more member(s): {}",
                g.members.len() - max_rows,
                parts.join(", ")
            );
        }
    }

    if !g.domains.is_empty() {
        let mut rows = vec![vec![
            "DOMAIN".to_string(),
            "NODES".to_string(),
            "PLACED".to_string(),
            "RESULT".to_string(),
            "SCORE".to_string(),
            "REASON".to_string(),
        ]];
        // The chosen and feasible domains first, best first; then the rejected ones.
        let mut domains: Vec<_> = g.domains.iter().collect();
        domains.sort_by_key(|d| {
            (
                d.result != DomainResult::Chosen,
                std::cmp::Reverse(d.score.unwrap_or(i64::MIN)),
            )
        });
        for d in domains.iter().take(max_rows) {
            let result = match d.result {
                DomainResult::Chosen => "chosen",
                DomainResult::Feasible => "feasible",
                DomainResult::Rejected => "rejected",
                DomainResult::Error => "error",
            };
            let score = match d.score {
                Some(s) if d.scores.is_empty() => s.to_string(),
                Some(s) => {
                    let parts: Vec<String> = d
                        .scores
                        .iter()
                        .map(|p| format!("{} {}", p.plugin, p.score))
                        .collect();
                    format!("{s} ({})", parts.join(" + "))
                }
                None => NOT_RUN.to_string(),
            };
            rows.push(vec![
                d.domain.clone(),
                d.nodes.to_string(),
                d.placed.to_string(),
                result.to_string(),
                score,
                d.reason.clone().unwrap_or_default(),
            ]);
        }
        out.push('\n');
        out.push_str(&columns(&rows));
        if domains.len() > max_rows {
            let _ = writeln!(
                out,
                "  ... and {} more domain(s), none chosen",
                domains.len() - max_rows
            );
        }
        if g.domains.iter().any(|d| d.pinned) {
            let _ = writeln!(
                out,
                "  The group's placed pods are in this domain: it is the only candidate."
            );
        }
    }
    out
}

/// How far a rejected node got: the position of its rejecting plugin among the filters
/// (later is closer to fitting), and resolvable before unresolvable.
fn closeness(e: &Explanation, n: &NodeVerdict) -> (usize, bool) {
    match &n.verdict {
        Verdict::Rejected(r) => (
            r.plugin
                .as_deref()
                .and_then(|p| e.filter_plugins.iter().position(|f| f == p))
                .unwrap_or(0),
            r.code == "Unschedulable",
        ),
        _ => (0, false),
    }
}

/// The rows shown (best scored first, then the closest rejected) and one line per group
/// left out.
fn pick_rows(e: &Explanation, max_rows: usize) -> (Vec<&NodeVerdict>, Vec<String>) {
    let by_name: BTreeMap<&str, &NodeVerdict> =
        e.nodes.iter().map(|n| (n.node.as_str(), n)).collect();
    let mut summary = Vec::new();
    // Scored nodes by total, best first (stable: scoring order among equals).
    let mut scored: Vec<(&str, i64)> = e
        .scores
        .iter()
        .map(|s| (s.node.as_str(), s.total))
        .collect();
    scored.sort_by_key(|s| std::cmp::Reverse(s.1));
    let mut feasible: Vec<&NodeVerdict> = if scored.is_empty() {
        e.nodes
            .iter()
            .filter(|n| n.verdict == Verdict::Feasible)
            .collect()
    } else {
        scored
            .iter()
            .filter_map(|(n, _)| by_name.get(n).copied())
            .collect()
    };
    if feasible.len() > max_rows {
        summary.push(format!(
            "... and {} more feasible node(s) with lower totals",
            feasible.len() - max_rows
        ));
        feasible.truncate(max_rows);
    }
    let mut rejected: Vec<&NodeVerdict> = e
        .nodes
        .iter()
        .filter(|n| matches!(n.verdict, Verdict::Rejected(_)))
        .collect();
    rejected.sort_by_key(|n| std::cmp::Reverse(closeness(e, n)));
    if rejected.len() > max_rows {
        let mut left: BTreeMap<&str, usize> = BTreeMap::new();
        for n in &rejected[max_rows..] {
            if let Verdict::Rejected(r) = &n.verdict {
                *left.entry(r.plugin.as_deref().unwrap_or("?")).or_default() += 1;
            }
        }
        let parts: Vec<String> = left.iter().map(|(p, c)| format!("{c} by {p}")).collect();
        summary.push(format!(
            "... and {} more rejected node(s): {}",
            rejected.len() - max_rows,
            parts.join(", ")
        ));
        rejected.truncate(max_rows);
    }
    let skipped = e
        .nodes
        .iter()
        .filter(|n| matches!(n.verdict, Verdict::Skipped { .. }))
        .count();
    if skipped > 0 {
        let reason = e
            .nodes
            .iter()
            .find_map(|n| match &n.verdict {
                Verdict::Skipped { reason } => Some(reason.as_str()),
                _ => None,
            })
            .unwrap_or("");
        summary.push(format!("{skipped} node(s) skipped: {reason}"));
    }
    feasible.extend(rejected);
    (feasible, summary)
}

fn row(e: &Explanation, n: &NodeVerdict, rejecting: &[&str]) -> Vec<String> {
    let mut cells = vec![n.node.clone()];
    match &n.verdict {
        Verdict::Rejected(r) => {
            let at = r
                .plugin
                .as_deref()
                .and_then(|p| e.filter_plugins.iter().position(|f| f == p));
            for p in rejecting {
                let pos = e.filter_plugins.iter().position(|f| f == p);
                cells.push(if r.plugin.as_deref() == Some(*p) {
                    r.reasons.join(", ")
                } else if pos < at {
                    PASSED.to_string()
                } else {
                    NOT_RUN.to_string()
                });
            }
            cells.extend(e.score_plugins.iter().map(|_| NOT_RUN.to_string()));
            if !e.scores.is_empty() {
                cells.push(NOT_RUN.to_string());
            }
        }
        _ => {
            cells.extend(rejecting.iter().map(|_| PASSED.to_string()));
            match e.scores_of(&n.node) {
                Some(s) => {
                    cells.extend(s.plugins.iter().map(|p| p.weighted.to_string()));
                    cells.push(s.total.to_string());
                }
                None => {
                    cells.extend(e.score_plugins.iter().map(|_| NOT_RUN.to_string()));
                    if !e.scores.is_empty() {
                        cells.push(NOT_RUN.to_string());
                    }
                }
            }
        }
    }
    cells
}

/// Left-aligned columns two spaces apart, indented by two.
fn columns(rows: &[Vec<String>]) -> String {
    let n = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..n)
        .map(|j| {
            rows.iter()
                .map(|r| r.get(j).map_or(0, |c| c.chars().count()))
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for r in rows {
        let mut line = String::from(" ");
        for (j, c) in r.iter().enumerate() {
            let _ = write!(line, " {c:w$}", w = widths[j]);
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

fn preemption(p: &super::Preemption) -> String {
    let mut out = String::new();
    if let Some(reason) = &p.not_eligible {
        let _ = writeln!(out, "\nPreemption: the pod may not preempt: {reason}");
        return out;
    }
    let _ = write!(out, "\nPreemption: ");
    match &p.nominated_node {
        Some(n) => {
            let _ = writeln!(out, "nominated to {n}.");
        }
        None => {
            let _ = writeln!(out, "no node found.");
        }
    }
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for n in &p.nodes {
        match &n.outcome {
            PreemptionOutcome::Candidate {
                victims,
                pdb_violations,
                chosen,
                why_not_chosen,
            } => {
                let v: Vec<String> = victims
                    .iter()
                    .map(|v| format!("{} (priority {})", v.pod, v.priority))
                    .collect();
                let verdict = if *chosen {
                    "chosen".to_string()
                } else {
                    format!("not chosen: {}", why_not_chosen.as_deref().unwrap_or(""))
                };
                let _ = writeln!(
                    out,
                    "  {}: evict {}; {} PDB violation(s); {verdict}",
                    n.node,
                    v.join(", "),
                    pdb_violations
                );
            }
            PreemptionOutcome::NoCandidate { reason } => {
                *counts
                    .entry(format!("no victims make room ({reason})"))
                    .or_default() += 1;
            }
            PreemptionOutcome::NotHelpful { reason } => {
                *counts
                    .entry(format!("preemption cannot help ({reason})"))
                    .or_default() += 1;
            }
            PreemptionOutcome::NotTried => {
                *counts
                    .entry("not tried: enough candidates were found first".to_string())
                    .or_default() += 1;
            }
        }
    }
    for (what, n) in counts {
        let _ = writeln!(out, "  {n} node(s): {what}");
    }
    out
}
