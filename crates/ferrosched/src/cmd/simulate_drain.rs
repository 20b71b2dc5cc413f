//! `simulate --drain`, `--drain-selector`, `--compress` and `--add-nodes`: their flags,
//! and the drain and compression answers as a table or JSON/YAML (the schemas are
//! `scheduler_core::simulate::capacity::{drain, compression, add_nodes}`,
//! docs/simulate.md).

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Args;
use scheduler_core::config::Loaded;
use scheduler_core::framework::Extender;
use scheduler_core::simulate::ClusterObjects;
use scheduler_core::simulate::PodResult;
use scheduler_core::simulate::capacity::add_nodes::{self, DEFAULT_MAX_NODES};
use scheduler_core::simulate::capacity::compression::{self, CompressionReport};
use scheduler_core::simulate::capacity::drain::{
    self, DrainReport, EvictedPod, NodeChoice, PdbViolation, why_not_placed,
};

use super::report::SimulateOutput;
use super::report::html::HtmlReport;
use super::report::whatif;

/// The what-if flags of `simulate` besides `--pod-template`: one question per run.
#[derive(Args, Debug)]
pub struct WhatIfArgs {
    /// Drain these nodes as `kubectl drain` would: cordon them, evict their pods (not
    /// DaemonSet or mirror pods) and reschedule them on the rest; reports where each
    /// lands, which fit nowhere and why, and the PodDisruptionBudgets the evictions exceed.
    #[arg(
        long,
        value_name = "NODE",
        num_args = 1..,
        conflicts_with_all = ["pod_template", "explain", "drain_selector", "compress", "add_nodes"]
    )]
    drain: Vec<String>,
    /// Drain the nodes whose labels match this selector (kubectl's `-l` syntax, e.g.
    /// `pool=batch,zone in (a,b)`).
    #[arg(
        long,
        value_name = "SELECTOR",
        conflicts_with_all = ["pod_template", "explain", "compress", "add_nodes"]
    )]
    drain_selector: Option<String>,
    /// How many of the emptiest nodes could be removed with every pod still placed, and
    /// the node that could not go, with why.
    #[arg(long, conflicts_with_all = ["pod_template", "explain", "add_nodes"])]
    compress: bool,
    /// Add copies of this Node (`<name>-0`, `<name>-1`, ...): the smallest number that
    /// places every pending pod of the dump, or --count of them.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["pod_template", "explain"])]
    add_nodes: Option<PathBuf>,
    /// With --add-nodes: add exactly N and report what the pending pods do.
    #[arg(long, value_name = "N", requires = "add_nodes")]
    count: Option<usize>,
    /// With --add-nodes (no --count): search no further than N nodes [default: 1000].
    #[arg(
        long,
        value_name = "N",
        requires = "add_nodes",
        conflicts_with = "count",
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    max_nodes: Option<u64>,
}

impl WhatIfArgs {
    /// Whether one of these questions was asked.
    pub fn asked(&self) -> bool {
        !self.drain.is_empty()
            || self.drain_selector.is_some()
            || self.compress
            || self.add_nodes.is_some()
    }

    /// A mistake in the flags' files, found before any simulation.
    pub fn check(&self) -> Result<Option<add_nodes::NodeTemplate>, String> {
        self.add_nodes
            .as_deref()
            .map(add_nodes::load_node_template)
            .transpose()
            .map_err(|e| format!("error: {e}"))
    }

    /// Answers the question asked, printed as `output` asks.
    pub fn answer(
        &self,
        objects: &ClusterObjects,
        loaded: &Loaded,
        seed: u64,
        template: Option<add_nodes::NodeTemplate>,
        extenders: &[Arc<dyn Extender>],
        output: SimulateOutput,
    ) -> ExitCode {
        let printed = if let Some(t) = template {
            let max = self
                .max_nodes
                .map_or(DEFAULT_MAX_NODES, |m| m.try_into().unwrap_or(usize::MAX));
            add_nodes::add_nodes(objects, loaded, seed, &t, self.count, max, extenders).map(|r| {
                emit(
                    &r,
                    output,
                    super::simulate_add_nodes::table,
                    whatif::add_nodes_page,
                )
            })
        } else if self.compress {
            compression::compress(objects, loaded, seed, extenders)
                .map(|r| emit(&r, output, compression_table, whatif::compression_page))
        } else {
            let choice = match &self.drain_selector {
                Some(s) => NodeChoice::Selector(s.clone()),
                None => NodeChoice::Names(self.drain.clone()),
            };
            drain::drain(objects, loaded, seed, &choice, extenders)
                .map(|r| emit(&r, output, drain_table, whatif::drain_page))
        };
        match printed {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::FAILURE
            }
        }
    }
}

fn emit<T: serde::Serialize>(
    r: &T,
    output: SimulateOutput,
    table: fn(&T) -> String,
    page: fn(&T) -> HtmlReport,
) {
    let Some(output) = output.plain() else {
        print!("{}", page(r).render());
        return;
    };
    match output.serialize(r) {
        Some(text) => print!("{text}"),
        None => print!("{}", table(r)),
    }
}

/// The drain as a table: each evicted pod and where it goes, then the budgets exceeded.
pub fn drain_table(r: &DrainReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "The dump's pending pods first: {} of {} scheduled.",
        r.pending.scheduled, r.pending.total
    );
    let _ = writeln!(out, "{}\n", drain_headline(r));
    evicted_rows(&mut out, &r.evicted);
    if !r.not_evictable.is_empty() {
        let _ = writeln!(out, "\nCannot be evicted:");
        for n in &r.not_evictable {
            let _ = writeln!(out, "  {} ({}): {}", n.pod, n.node, n.reason);
        }
    }
    if !r.staying.is_empty() {
        let list: Vec<String> = r
            .staying
            .iter()
            .map(|s| format!("{} ({}, {})", s.pod, s.reason, s.node))
            .collect();
        let _ = writeln!(out, "\nNot evicted: {}.", list.join(", "));
    }
    if !r.preempted.is_empty() {
        let _ = writeln!(
            out,
            "\nPreempted to make room (they would be pending): {}.",
            r.preempted.join(", ")
        );
    }
    pdb_rows(&mut out, &r.pdb_violations);
    out
}

/// The drain in one sentence: evicted, placed, not placed, and pods that cannot be evicted.
pub fn drain_headline(r: &DrainReport) -> String {
    let mut s = format!(
        "Draining {}: {} pod(s) evicted, {} placed elsewhere, {} not placed",
        r.nodes.join(", "),
        r.evicted.len(),
        r.placed,
        r.not_placed
    );
    if !r.not_evictable.is_empty() {
        let _ = write!(
            s,
            "; {} pod(s) cannot be evicted (the drain would not finish)",
            r.not_evictable.len()
        );
    }
    s.push('.');
    s
}

fn evicted_rows(out: &mut String, evicted: &[EvictedPod]) {
    if evicted.is_empty() {
        let _ = writeln!(out, "No pod to evict.");
        return;
    }
    let pod_w = crate::cmd::output::column_width(evicted.iter().map(|e| e.pod.len()), 3);
    let from_w = crate::cmd::output::column_width(evicted.iter().map(|e| e.from.len()), 4);
    let _ = writeln!(
        out,
        "{:pod_w$}  {:from_w$}  {:>8}  RESULT",
        "POD", "FROM", "PRIORITY"
    );
    for e in evicted {
        let result = match &e.result {
            PodResult::Scheduled { node, preempted } if preempted.is_empty() => {
                format!("-> {node}")
            }
            PodResult::Scheduled { node, preempted } => {
                format!("-> {node} (preempted {})", preempted.join(", "))
            }
            other => format!("not placed: {}", why_not_placed(other).unwrap_or_default()),
        };
        let _ = writeln!(
            out,
            "{:pod_w$}  {:from_w$}  {:>8}  {result}",
            e.pod, e.from, e.priority
        );
        for d in &e.devices {
            let _ = writeln!(out, "{:pod_w$}  device: {d}", "");
        }
        for n in &e.notes {
            let _ = writeln!(out, "{:pod_w$}  note: {n}", "");
        }
    }
}

fn pdb_rows(out: &mut String, violations: &[PdbViolation]) {
    if violations.is_empty() {
        let _ = writeln!(out, "\nNo PodDisruptionBudget is exceeded.");
        return;
    }
    let _ = writeln!(out, "\nPodDisruptionBudgets exceeded:");
    for v in violations {
        let _ = writeln!(
            out,
            "  {} ({}; {} expected, {} healthy, {} must stay: {} disruption(s) allowed): evicts {}; over the budget: {}",
            v.pdb,
            v.budget,
            v.expected_pods,
            v.current_healthy,
            v.desired_healthy,
            v.disruptions_allowed,
            v.evicted.join(", "),
            v.exceeding.join(", ")
        );
    }
}

/// The compression as a table: what can go, where its pods land, what stopped it.
pub fn compression_table(r: &CompressionReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "The dump's pending pods first: {} of {} scheduled.",
        r.pending.scheduled, r.pending.total
    );
    let _ = writeln!(
        out,
        "{} of {} candidate node(s) can be removed{}{}.",
        r.removable.len(),
        r.candidates.len(),
        if r.removable.is_empty() { "" } else { ": " },
        r.removable.join(", ")
    );
    if !r.candidates.is_empty() {
        let w = crate::cmd::output::column_width(r.candidates.iter().map(|c| c.node.len()), 4);
        let _ = writeln!(out, "\nCandidates, emptiest first:");
        let _ = writeln!(out, "{:w$}  {:>4}  {:>6}", "NODE", "CPU", "MEMORY");
        for c in &r.candidates {
            let _ = writeln!(
                out,
                "{:w$}  {:>3}%  {:>5}%",
                c.node, c.cpu_percent, c.memory_percent
            );
        }
    }
    if !r.moves.is_empty() {
        let _ = writeln!(out, "\nWhere the pods of the removable nodes go:");
        evicted_rows(&mut out, &r.moves);
    }
    match &r.stopped_by {
        None => {
            let _ = writeln!(out, "\nEvery candidate can go.");
        }
        Some(s) => {
            let _ = writeln!(out, "\n{} cannot go:", s.node);
            for p in &s.not_placed {
                let _ = writeln!(out, "  {} is not placed: {}", p.pod, p.message);
            }
            if !s.preempted.is_empty() {
                let _ = writeln!(
                    out,
                    "  placing its pods would preempt {}",
                    s.preempted.join(", ")
                );
            }
            for v in &s.pdb_violations {
                let _ = writeln!(
                    out,
                    "  evicting {} exceeds PodDisruptionBudget {} ({}; {} disruption(s) allowed)",
                    v.exceeding.join(", "),
                    v.pdb,
                    v.budget,
                    v.disruptions_allowed
                );
            }
        }
    }
    if !r.kept.is_empty() {
        let _ = writeln!(out, "\nNot candidates:");
        for k in &r.kept {
            let _ = writeln!(out, "  {}: {}", k.node, k.reason);
        }
    }
    if !r.tried.is_empty() {
        let tried: Vec<String> = r
            .tried
            .iter()
            .map(|t| format!("{} ({})", t.nodes, if t.ok { "ok" } else { "failed" }))
            .collect();
        let _ = writeln!(out, "\nCounts simulated: {}.", tried.join(", "));
    }
    out
}
