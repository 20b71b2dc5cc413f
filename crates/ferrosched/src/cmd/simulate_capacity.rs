//! `simulate --pod-template`: the answer to "how many more fit", as a table or JSON/YAML
//! (the schema is `scheduler_core::simulate::capacity::CapacityReport`, docs/simulate.md).

use std::fmt::Write as _;
use std::process::ExitCode;

use scheduler_core::simulate::capacity::{CapacityError, CapacityReport, Stop};

use super::output::Output;

/// Prints the answer (or the error) and gives the exit code.
pub fn print(answer: Result<CapacityReport, CapacityError>, output: Output) -> ExitCode {
    let report = match answer {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    match output.serialize(&report) {
        Some(text) => print!("{text}"),
        None => print!("{}", table(&report)),
    }
    ExitCode::SUCCESS
}

/// The human-readable answer: the count, per node how many copies, what stopped them.
pub fn table(r: &CapacityReport) -> String {
    let mut out = String::new();
    let t = &r.template;
    let _ = writeln!(
        out,
        "The dump's pending pods first: {} of {} scheduled.",
        r.pending.scheduled, r.pending.total
    );
    let what = match &r.gang {
        Some(g) => format!(
            "PodGroup {}/{} (a gang of {} {} pod(s) {}/{})",
            t.namespace, g.pod_group, g.min_count, t.kind, t.namespace, t.name
        ),
        None => format!("{} {}/{}", t.kind, t.namespace, t.name),
    };
    let _ = writeln!(
        out,
        "{what} (profile {}): {} {}{} fit{}.",
        t.profile,
        r.placed,
        if r.gang.is_some() {
            "whole gang cop"
        } else {
            "cop"
        },
        if r.placed == 1 { "y" } else { "ies" },
        if matches!(r.stopped_by, Stop::MaxReached) {
            " (at least; --max reached)"
        } else {
            ""
        },
    );
    if !r.nodes.is_empty() {
        let node_w = crate::cmd::output::column_width(r.nodes.iter().map(|n| n.node.len()), 4);
        let head = if r.gang.is_some() { "PODS" } else { "COPIES" };
        let _ = writeln!(out, "\n{:node_w$}  {:>6}", "NODE", head);
        for n in &r.nodes {
            let _ = writeln!(out, "{:node_w$}  {:>6}", n.node, n.copies);
        }
        out.push('\n');
    }
    if !r.gangs.is_empty() {
        let _ = writeln!(out, "Gangs placed:");
        for g in &r.gangs {
            let pods: Vec<String> = g
                .members
                .iter()
                .map(|(p, n)| format!("{} -> {n}", p.rsplit('/').next().unwrap_or(p)))
                .collect();
            let _ = writeln!(out, "  {}: {}", g.pod_group, pods.join(", "));
        }
        out.push('\n');
    }
    let _ = match &r.stopped_by {
        Stop::Unschedulable { message } if r.gang.is_some() => {
            writeln!(out, "The next gang does not fit: {message}")
        }
        Stop::Unschedulable { message } => {
            writeln!(out, "The next copy does not fit: {message}")
        }
        Stop::MaxReached => writeln!(
            out,
            "Stopped by --max {}, not by a failure: more copies may fit.",
            r.max.unwrap_or(r.placed)
        ),
        Stop::Gated { message } => {
            writeln!(out, "The copies never reach a scheduling cycle: {message}")
        }
        Stop::Error { message } => writeln!(out, "The next copy failed with an error: {message}"),
    };
    out
}
