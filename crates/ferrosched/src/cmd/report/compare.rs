//! `simulate --compare-config FILE`: the same dump under two configs, as a table, JSON/YAML
//! (`scheduler_core::simulate::compare::Comparison`) or an HTML page.

use std::fmt::Write as _;
use std::path::Path;
use std::process::ExitCode;

use scheduler_core::config;
use scheduler_core::simulate::compare::{self, Comparison, ConfigRun, Side};

use super::Request;
use super::html::{self, HtmlReport, NodeBars, PendingPod, Table};

/// Rows of each pod list a table shows before the rest is only counted.
pub const TABLE_ROWS: usize = 20;

pub fn run(req: &Request<'_>, second: &Path) -> ExitCode {
    let other = match config::load_file(second) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: --compare-config: {e}");
            return ExitCode::FAILURE;
        }
    };
    for w in &other.warnings {
        eprintln!("{w}");
    }
    let sides = [
        Side {
            name: req.config_name.clone(),
            loaded: req.loaded,
        },
        Side {
            name: second.display().to_string(),
            loaded: &other,
        },
    ];
    let c = match compare::compare(
        req.objects,
        sides,
        req.seed,
        req.template,
        req.max,
        req.extenders,
    ) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    match req.output.plain() {
        Some(plain) => match plain.serialize(&c) {
            Some(text) => print!("{text}"),
            None => print!("{}", table(&c)),
        },
        None => print!("{}", page(&c).render()),
    }
    ExitCode::SUCCESS
}

fn percent(f: Option<&compare::Fragmentation>) -> String {
    f.map_or("-".into(), |f| {
        format!("cpu {}%, memory {}%", f.cpu_percent, f.memory_percent)
    })
}

fn copies(r: &ConfigRun) -> String {
    r.copies.as_ref().map_or("-".into(), |c| {
        format!(
            "{}{}",
            c.placed,
            if c.max == Some(c.placed) {
                " (--max)"
            } else {
                ""
            }
        )
    })
}

/// The summary rows: (what, under the first, under the second).
fn summary(c: &Comparison) -> Vec<[String; 3]> {
    let [a, b] = [&c.configs[0], &c.configs[1]];
    let mut rows = vec![
        ["config".into(), a.name.clone(), b.name.clone()],
        [
            "pending pods placed".into(),
            format!("{}/{}", a.scheduled, a.pending),
            format!("{}/{}", b.scheduled, b.pending),
        ],
    ];
    if a.copies.is_some() {
        rows.push(["copies placed".into(), copies(a), copies(b)]);
    }
    rows.push([
        "empty nodes".into(),
        format!("{}/{}", a.empty_nodes.len(), a.nodes.len()),
        format!("{}/{}", b.empty_nodes.len(), b.nodes.len()),
    ]);
    rows.push([
        "fragmentation".into(),
        percent(a.fragmentation.as_ref()),
        percent(b.fragmentation.as_ref()),
    ]);
    rows
}

fn reference_line(c: &Comparison) -> String {
    match &c.reference_pod {
        Some(r) => format!(
            "Fragmentation: the share of free CPU (memory) on nodes where {} ({} CPU, {} memory) no longer fits.",
            r.pod,
            html::amount("cpu", r.cpu_milli),
            html::amount("memory", r.memory)
        ),
        None => "Fragmentation: no pending pod and no --pod-template to measure it with.".into(),
    }
}

fn differences_line(c: &Comparison) -> String {
    format!(
        "Placed differently: {} pod(s) on other nodes, {} placed only under the first, {} only under the second; {} on the same node.",
        c.moved.len(),
        c.placed_only_by_first.len(),
        c.placed_only_by_second.len(),
        c.same_node
    )
}

/// The human-readable comparison.
pub fn table(c: &Comparison) -> String {
    let mut out = String::new();
    let rows = summary(c);
    let w0 = rows.iter().map(|r| r[0].len()).max().unwrap_or(0);
    let w1 = rows.iter().map(|r| r[1].len()).max().unwrap_or(0).max(5);
    let _ = writeln!(out, "{:w0$}  {:w1$}  SECOND", "", "FIRST");
    for r in &rows {
        let _ = writeln!(out, "{:w0$}  {:w1$}  {}", r[0], r[1], r[2]);
    }
    let _ = writeln!(out, "{}\n", reference_line(c));
    let _ = writeln!(out, "{}", differences_line(c));
    if !c.moved.is_empty() {
        let pw = crate::cmd::output::column_width(c.moved.iter().map(|m| m.pod.len()), 3);
        let fw = crate::cmd::output::column_width(c.moved.iter().map(|m| m.first.len()), 5);
        let _ = writeln!(out, "\n{:pw$}  {:fw$}  SECOND", "POD", "FIRST");
        for m in c.moved.iter().take(TABLE_ROWS) {
            let _ = writeln!(out, "{:pw$}  {:fw$}  {}", m.pod, m.first, m.second);
        }
        cut(&mut out, c.moved.len());
    }
    for (which, list) in [
        ("first", &c.placed_only_by_first),
        ("second", &c.placed_only_by_second),
    ] {
        if !list.is_empty() {
            let _ = writeln!(out, "\nPlaced only under the {which} config:");
            for p in list.iter().take(TABLE_ROWS) {
                let _ = writeln!(out, "  {p}");
            }
            cut(&mut out, list.len());
        }
    }
    for (which, r) in [("first", &c.configs[0]), ("second", &c.configs[1])] {
        if !r.empty_nodes.is_empty() {
            let shown: Vec<&str> = r
                .empty_nodes
                .iter()
                .take(TABLE_ROWS)
                .map(String::as_str)
                .collect();
            let more = r.empty_nodes.len() - shown.len();
            let _ = writeln!(
                out,
                "\nEmpty under the {which} config: {}{}",
                shown.join(", "),
                if more > 0 {
                    format!(" ... and {more} more")
                } else {
                    String::new()
                }
            );
        }
    }
    let [a, b] = [&c.configs[0], &c.configs[1]];
    let nw = crate::cmd::output::column_width(a.nodes.iter().map(|n| n.node.len()), 4);
    let _ = writeln!(
        out,
        "\n{:nw$}  {:>15}  {:>15}  {:>19}  {:>19}",
        "NODE", "CPU FIRST", "CPU SECOND", "MEMORY FIRST", "MEMORY SECOND"
    );
    for n in &a.nodes {
        let m = b
            .nodes
            .binary_search_by(|x| x.node.cmp(&n.node))
            .ok()
            .map(|i| &b.nodes[i]);
        let cpu = |u: i64| {
            format!(
                "{}/{}",
                html::amount("cpu", u),
                html::amount("cpu", n.cpu_allocatable_milli)
            )
        };
        let mem = |u: i64| {
            format!(
                "{}/{}",
                html::amount("memory", u),
                html::amount("memory", n.memory_allocatable)
            )
        };
        let _ = writeln!(
            out,
            "{:nw$}  {:>15}  {:>15}  {:>19}  {:>19}",
            n.node,
            cpu(n.cpu_milli),
            m.map_or("-".into(), |m| cpu(m.cpu_milli)),
            mem(n.memory),
            m.map_or("-".into(), |m| mem(m.memory)),
        );
    }
    if c.configs.iter().any(|r| !r.not_placed.is_empty()) {
        let _ = writeln!(out, "\nNot placed (-o json for the reasons):");
        for (which, r) in [("first", a), ("second", b)] {
            if r.not_placed.is_empty() {
                continue;
            }
            let names: Vec<&str> = r
                .not_placed
                .iter()
                .take(TABLE_ROWS)
                .map(|p| p.pod.as_str())
                .collect();
            let _ = writeln!(out, "  under the {which}: {}", names.join(", "));
            cut(&mut out, r.not_placed.len());
        }
    }
    out
}

fn cut(out: &mut String, total: usize) {
    if total > TABLE_ROWS {
        let _ = writeln!(
            out,
            "  ... and {} more (-o json lists all)",
            total - TABLE_ROWS
        );
    }
}

/// The comparison as a report page: the first config's usage as the first bar, the
/// second's as the other.
pub fn page(c: &Comparison) -> HtmlReport {
    let [a, b] = [&c.configs[0], &c.configs[1]];
    let mut pending = Vec::new();
    for r in [a, b] {
        for p in &r.not_placed {
            pending.push(PendingPod {
                pod: format!("{} (under {})", p.pod, r.name),
                reason: p.reason.clone(),
            });
        }
    }
    let mut tables = vec![Table {
        caption: "Summary".into(),
        header: vec!["".into(), "first".into(), "second".into()],
        rows: summary(c).into_iter().map(Vec::from).collect(),
    }];
    tables.push(Table {
        caption: "Pods on other nodes".into(),
        header: vec!["Pod".into(), a.name.clone(), b.name.clone()],
        rows: c
            .moved
            .iter()
            .map(|m| vec![m.pod.clone(), m.first.clone(), m.second.clone()])
            .collect(),
    });
    for (which, list) in [(a, &c.placed_only_by_first), (b, &c.placed_only_by_second)] {
        tables.push(Table {
            caption: format!("Placed only under {}", which.name),
            header: vec!["Pod".into()],
            rows: list.iter().map(|p| vec![p.clone()]).collect(),
        });
    }
    for r in [a, b] {
        tables.push(Table {
            caption: format!("Empty nodes under {}", r.name),
            header: vec!["Node".into()],
            rows: r.empty_nodes.iter().map(|n| vec![n.clone()]).collect(),
        });
    }
    HtmlReport {
        title: "ferrosched simulate --compare-config".into(),
        question: format!(
            "How do {} and {} place the same dump{}?",
            a.name,
            b.name,
            match &c.reference_pod {
                Some(_) if a.copies.is_some() => " and copies of the template",
                _ => "",
            }
        ),
        answer: vec![differences_line(c), reference_line(c)],
        labels: [a.name.clone(), b.name.clone()],
        nodes: NodeBars::pair(&a.nodes, &b.nodes),
        tables,
        pending,
    }
}
