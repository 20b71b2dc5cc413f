//! `-o html` for `--drain`, `--compress` and `--add-nodes`: each answer as a page, with
//! every node's usage before and after (drained, removed and added nodes marked).

use scheduler_core::simulate::PodResult;
use scheduler_core::simulate::capacity::add_nodes::AddNodesReport;
use scheduler_core::simulate::capacity::compression::CompressionReport;
use scheduler_core::simulate::capacity::drain::{
    DrainReport, EvictedPod, PdbViolation, why_not_placed,
};

use super::html::{HtmlReport, NodeBars, PendingPod, Table};

/// The drain: where each evicted pod goes, which fit nowhere and why, the budgets exceeded.
pub fn drain_page(r: &DrainReport) -> HtmlReport {
    let mut answer = vec![
        crate::cmd::simulate_drain::drain_headline(r),
        format!(
            "The dump's pending pods first: {} of {} scheduled.",
            r.pending.scheduled, r.pending.total
        ),
    ];
    answer.push(pdb_sentence(&r.pdb_violations));
    if !r.preempted.is_empty() {
        answer.push(format!(
            "Preempted to make room (they would be pending): {}.",
            r.preempted.join(", ")
        ));
    }
    let mut nodes = NodeBars::pair(&r.usage.before, &r.usage.after);
    NodeBars::mark(&mut nodes, &r.nodes, "drained");
    let mut tables = vec![evicted_table("Evicted pods", &r.evicted)];
    if !r.pdb_violations.is_empty() {
        tables.push(pdb_table(&r.pdb_violations));
    }
    if !r.not_evictable.is_empty() {
        tables.push(Table {
            caption: "Cannot be evicted (the drain would not finish)".into(),
            header: vec!["Pod".into(), "Node".into(), "Why".into()],
            rows: r
                .not_evictable
                .iter()
                .map(|n| vec![n.pod.clone(), n.node.clone(), n.reason.clone()])
                .collect(),
        });
    }
    tables.push(Table {
        caption: "Not evicted".into(),
        header: vec!["Pod".into(), "Node".into(), "Why".into()],
        rows: r
            .staying
            .iter()
            .map(|s| vec![s.pod.clone(), s.node.clone(), s.reason.clone()])
            .collect(),
    });
    HtmlReport {
        title: "ferrosched simulate --drain".into(),
        question: format!("What does draining {} do?", r.nodes.join(", ")),
        answer,
        labels: [
            "before the drain (the dump's pending pods placed)".into(),
            "after the drain".into(),
        ],
        nodes,
        tables,
        pending: r
            .evicted
            .iter()
            .filter_map(|e| {
                why_not_placed(&e.result).map(|reason| PendingPod {
                    pod: format!("{} (evicted from {})", e.pod, e.from),
                    reason,
                })
            })
            .chain(r.preempted.iter().map(|p| PendingPod {
                pod: p.clone(),
                reason: "preempted by an evicted pod".into(),
            }))
            .collect(),
    }
}

/// The compression: how many nodes can go, which, and the node that could not and why.
pub fn compression_page(r: &CompressionReport) -> HtmlReport {
    let mut answer = vec![format!(
        "{} of {} candidate node(s) can be removed{}{}.",
        r.removable.len(),
        r.candidates.len(),
        if r.removable.is_empty() { "" } else { ": " },
        r.removable.join(", ")
    )];
    let mut pending = Vec::new();
    let mut tables = Vec::new();
    match &r.stopped_by {
        None => answer.push("Every candidate can go.".into()),
        Some(s) => {
            let mut why = Vec::new();
            if !s.not_placed.is_empty() {
                why.push(format!(
                    "{} pod(s) would fit nowhere ({})",
                    s.not_placed.len(),
                    s.not_placed
                        .iter()
                        .map(|p| p.pod.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
            if !s.preempted.is_empty() {
                why.push(format!(
                    "placing its pods would preempt {}",
                    s.preempted.join(", ")
                ));
            }
            for v in &s.pdb_violations {
                why.push(format!(
                    "evicting {} exceeds PodDisruptionBudget {} ({}; {} disruption(s) allowed)",
                    v.exceeding.join(", "),
                    v.pdb,
                    v.budget,
                    v.disruptions_allowed
                ));
            }
            answer.push(format!("{} cannot go: {}.", s.node, why.join("; ")));
            pending.extend(s.not_placed.iter().map(|p| PendingPod {
                pod: format!("{} (if {} went too)", p.pod, s.node),
                reason: p.message.clone(),
            }));
            if !s.pdb_violations.is_empty() {
                tables.push(pdb_table(&s.pdb_violations));
            }
        }
    }
    answer.push(format!(
        "The dump's pending pods first: {} of {} scheduled.",
        r.pending.scheduled, r.pending.total
    ));
    let tried: Vec<String> = r
        .tried
        .iter()
        .map(|t| format!("{} ({})", t.nodes, if t.ok { "ok" } else { "failed" }))
        .collect();
    if !tried.is_empty() {
        answer.push(format!("Counts simulated: {}.", tried.join(", ")));
    }
    tables.insert(
        0,
        Table {
            caption: "Candidates, emptiest first".into(),
            header: vec![
                "Node".into(),
                "CPU".into(),
                "Memory".into(),
                "Removable".into(),
            ],
            rows: r
                .candidates
                .iter()
                .map(|c| {
                    let removable = if r.removable.contains(&c.node) {
                        "yes"
                    } else if r.stopped_by.as_ref().is_some_and(|s| s.node == c.node) {
                        "no: the node that could not go"
                    } else {
                        "no"
                    };
                    vec![
                        c.node.clone(),
                        format!("{}%", c.cpu_percent),
                        format!("{}%", c.memory_percent),
                        removable.into(),
                    ]
                })
                .collect(),
        },
    );
    tables.insert(
        1,
        evicted_table("Where the pods of the removable nodes go", &r.moves),
    );
    tables.push(Table {
        caption: "Not candidates".into(),
        header: vec!["Node".into(), "Kept because".into()],
        rows: r
            .kept
            .iter()
            .map(|k| vec![k.node.clone(), k.reason.clone()])
            .collect(),
    });
    let mut nodes = NodeBars::pair(&r.usage.before, &r.usage.after);
    NodeBars::mark(&mut nodes, &r.removable, "removed");
    HtmlReport {
        title: "ferrosched simulate --compress".into(),
        question: "How many of the emptiest nodes could go with every pod still placed?".into(),
        answer,
        labels: [
            "before (the dump's pending pods placed)".into(),
            "after the removable nodes are gone".into(),
        ],
        nodes,
        tables,
        pending,
    }
}

/// Nodes to add: the count, the proof that one fewer leaves a pod over, the leftovers.
pub fn add_nodes_page(r: &AddNodesReport) -> HtmlReport {
    let mut answer = vec![crate::cmd::simulate_add_nodes::headline(r)];
    if !r.tried.is_empty() && r.count.is_none() {
        let tried: Vec<String> = r
            .tried
            .iter()
            .map(|t| format!("{} ({} left)", t.nodes, t.left_over))
            .collect();
        answer.push(format!("Counts simulated: {}.", tried.join(", ")));
    }
    let added: Vec<String> = r.new_nodes.iter().map(|n| n.node.clone()).collect();
    let mut nodes = NodeBars::pair(&r.usage.before, &r.usage.after);
    NodeBars::mark(&mut nodes, &added, "added");
    let mut tables = vec![Table {
        caption: "Pods per added node".into(),
        header: vec!["Node".into(), "Pods".into()],
        rows: r
            .new_nodes
            .iter()
            .map(|n| vec![n.node.clone(), n.pods.to_string()])
            .collect(),
    }];
    if !r.not_counted.is_empty() {
        tables.push(Table {
            caption: "Not counted (no node helps them)".into(),
            header: vec!["Pod".into(), "Why".into()],
            rows: r
                .not_counted
                .iter()
                .map(|l| vec![l.pod.clone(), l.reason.clone()])
                .collect(),
        });
    }
    HtmlReport {
        title: "ferrosched simulate --add-nodes".into(),
        question: match r.count {
            Some(n) => format!(
                "What do the dump's {} pending pod(s) do with {n} node(s) like {} added?",
                r.pending, r.template
            ),
            None => format!(
                "How many nodes like {} do the dump's {} pending pod(s) need?",
                r.template, r.pending
            ),
        },
        answer,
        labels: [
            "before (the dump's bound pods)".into(),
            format!(
                "after the pending pods, with {} node(s) added",
                r.nodes_added
            ),
        ],
        nodes,
        tables,
        pending: r
            .left_over
            .iter()
            .map(|l| PendingPod {
                pod: l.pod.clone(),
                reason: l.reason.clone(),
            })
            .collect(),
    }
}

fn pdb_sentence(v: &[PdbViolation]) -> String {
    if v.is_empty() {
        return "No PodDisruptionBudget is exceeded.".into();
    }
    let names: Vec<String> = v
        .iter()
        .map(|v| {
            format!(
                "{} ({}; {} disruption(s) allowed; over the budget: {})",
                v.pdb,
                v.budget,
                v.disruptions_allowed,
                v.exceeding.join(", ")
            )
        })
        .collect();
    format!("PodDisruptionBudgets exceeded: {}.", names.join("; "))
}

fn pdb_table(v: &[PdbViolation]) -> Table {
    Table {
        caption: "PodDisruptionBudgets exceeded".into(),
        header: [
            "Budget",
            "Rule",
            "Expected",
            "Healthy",
            "Must stay",
            "Allowed",
            "Evicted",
            "Over the budget",
        ]
        .map(String::from)
        .to_vec(),
        rows: v
            .iter()
            .map(|v| {
                vec![
                    v.pdb.clone(),
                    v.budget.clone(),
                    v.expected_pods.to_string(),
                    v.current_healthy.to_string(),
                    v.desired_healthy.to_string(),
                    v.disruptions_allowed.to_string(),
                    v.evicted.join(", "),
                    v.exceeding.join(", "),
                ]
            })
            .collect(),
    }
}

fn evicted_table(caption: &str, evicted: &[EvictedPod]) -> Table {
    Table {
        caption: caption.into(),
        header: ["Pod", "From", "Priority", "Goes to", "Devices", "Notes"]
            .map(String::from)
            .to_vec(),
        rows: evicted
            .iter()
            .map(|e| {
                let to = match &e.result {
                    PodResult::Scheduled { node, preempted } if preempted.is_empty() => {
                        node.clone()
                    }
                    PodResult::Scheduled { node, preempted } => {
                        format!("{node} (preempts {})", preempted.join(", "))
                    }
                    other => format!("not placed: {}", why_not_placed(other).unwrap_or_default()),
                };
                vec![
                    e.pod.clone(),
                    e.from.clone(),
                    e.priority.to_string(),
                    to,
                    e.devices
                        .iter()
                        .map(|d| d.to_string())
                        .collect::<Vec<_>>()
                        .join("; "),
                    e.notes.join("; "),
                ]
            })
            .collect(),
    }
}
