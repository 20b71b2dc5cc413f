//! `simulate --add-nodes`: how many nodes of a shape the pending pods need, as a table
//! (JSON/YAML is `scheduler_core::simulate::capacity::add_nodes::AddNodesReport`).

use std::fmt::Write as _;

use scheduler_core::simulate::capacity::add_nodes::AddNodesReport;

/// The answer's first sentence: the count and, when searching, what one fewer leaves.
pub fn headline(r: &AddNodesReport) -> String {
    let mut out = String::new();
    match (r.count, r.all_placed) {
        (Some(n), true) => {
            let _ = writeln!(
                out,
                "With {n} node(s) like {}: all {} pending pod(s) placed.",
                r.template, r.pending
            );
        }
        (Some(n), false) => {
            let _ = writeln!(
                out,
                "With {n} node(s) like {}: {} of {} pending pod(s) placed, {} left over.",
                r.template,
                r.placed,
                r.pending,
                r.left_over.len()
            );
        }
        (None, true) => {
            let _ = write!(
                out,
                "{} node(s) like {} place all {} pending pod(s)",
                r.nodes_added, r.template, r.pending
            );
            let _ = match &r.one_fewer {
                Some(f) => writeln!(
                    out,
                    "; with {} node(s), {} would be left over.",
                    f.nodes, f.left_over
                ),
                None => writeln!(out, "."),
            };
        }
        (None, false) => {
            let _ = writeln!(
                out,
                "Even {} node(s) like {} (--max-nodes) leave {} of {} pending pod(s) unplaced.",
                r.nodes_added,
                r.template,
                r.left_over.len(),
                r.pending
            );
        }
    }
    out.trim_end().to_string()
}

/// The answer: the count, how sure it is, where the pods went, what is left over.
pub fn table(r: &AddNodesReport) -> String {
    let mut out = headline(r);
    out.push('\n');
    let used: Vec<_> = r.new_nodes.iter().filter(|n| n.pods > 0).collect();
    if !used.is_empty() {
        let w = used.iter().map(|n| n.node.len()).max().unwrap_or(4).max(4);
        let _ = writeln!(out, "\n{:w$}  {:>4}", "NODE", "PODS");
        for n in &used {
            let _ = writeln!(out, "{:w$}  {:>4}", n.node, n.pods);
        }
        let empty = r.new_nodes.len() - used.len();
        if empty > 0 {
            let _ = writeln!(out, "({empty} added node(s) got no pod)");
        }
    }
    if !r.left_over.is_empty() {
        let _ = writeln!(out, "\nLeft over:");
        for l in &r.left_over {
            let _ = writeln!(out, "  {}: {}", l.pod, l.reason);
        }
    }
    if !r.not_counted.is_empty() {
        let _ = writeln!(out, "\nNot counted (no node helps them):");
        for l in &r.not_counted {
            let _ = writeln!(out, "  {}: {}", l.pod, l.reason);
        }
    }
    if r.count.is_none() && !r.tried.is_empty() {
        let tried: Vec<String> = r
            .tried
            .iter()
            .map(|t| format!("{} ({} left)", t.nodes, t.left_over))
            .collect();
        let _ = writeln!(out, "\nCounts simulated: {}.", tried.join(", "));
    }
    out
}
