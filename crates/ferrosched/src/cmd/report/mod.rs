//! `simulate -o html` and `simulate --compare-config`: the reports that are more than one
//! table. [`html::HtmlReport`] is the page model every question fills.

pub mod compare;
pub mod html;
pub mod whatif;

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use clap::ValueEnum;
use scheduler_core::config::Loaded;
use scheduler_core::framework::Extender;
use scheduler_core::simulate::capacity::{self, PodTemplate, Stop};
use scheduler_core::simulate::{self, ClusterObjects, PodResult};

use super::output::Output;
use html::{HtmlReport, NodeBars, PendingPod, Table};

/// `simulate -o`: the shared formats, and a self-contained HTML page.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SimulateOutput {
    /// Human-readable.
    Table,
    Json,
    Yaml,
    /// One self-contained HTML page on stdout (no external URL, script or font).
    Html,
}

impl SimulateOutput {
    /// The shared format, or `None` for HTML.
    pub fn plain(self) -> Option<Output> {
        match self {
            SimulateOutput::Table => Some(Output::Table),
            SimulateOutput::Json => Some(Output::Json),
            SimulateOutput::Yaml => Some(Output::Yaml),
            SimulateOutput::Html => None,
        }
    }
}

/// What `simulate` was asked, once the dump, config and template are read.
pub struct Request<'a> {
    pub objects: &'a ClusterObjects,
    pub loaded: &'a Loaded,
    /// How the first config is named in reports (its file, or what default it is).
    pub config_name: String,
    pub compare_config: Option<&'a Path>,
    pub template: Option<&'a PodTemplate>,
    pub max: Option<usize>,
    pub seed: u64,
    pub extenders: &'a [Arc<dyn Extender>],
    pub output: SimulateOutput,
    /// `--drain`, `--compress` or `--add-nodes` was asked (answered by `simulate_drain`).
    pub what_if: bool,
}

/// Answers the request when it is a comparison or asks for HTML; `None` leaves it to
/// `simulate`'s other outputs.
pub fn answer(req: &Request<'_>) -> Option<ExitCode> {
    if let Some(second) = req.compare_config {
        return Some(compare::run(req, second));
    }
    if req.output != SimulateOutput::Html || req.what_if {
        return None;
    }
    let page = match req.template {
        Some(t) => capacity_page(req, t),
        None => simulate_page(req),
    };
    Some(match page {
        Ok(p) => {
            print!("{}", p.render());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    })
}

/// Plain `simulate`: where the dump's pending pods land.
fn simulate_page(req: &Request<'_>) -> Result<HtmlReport, String> {
    let report =
        simulate::run_with_extenders(req.objects, req.loaded, req.seed, None, req.extenders)
            .map_err(|e| e.to_string())?;
    let before = simulate::usage_before(req.objects);
    let placed: Vec<Vec<String>> = report
        .outcomes
        .iter()
        .filter_map(|o| match &o.result {
            PodResult::Scheduled { node, preempted } => {
                Some(vec![o.pod.clone(), node.clone(), preempted.join(", ")])
            }
            _ => None,
        })
        .collect();
    Ok(HtmlReport {
        title: "ferrosched simulate".into(),
        question: format!(
            "Where do the dump's {} pending pod(s) land under {}?",
            report.outcomes.len(),
            req.config_name
        ),
        answer: vec![format!(
            "{} of {} pending pod(s) scheduled.",
            report.scheduled(),
            report.outcomes.len()
        )],
        labels: [
            "before (the dump's bound pods)".into(),
            "after the simulation".into(),
        ],
        nodes: NodeBars::pair(&before, &report.nodes),
        tables: vec![Table {
            caption: "Placed".into(),
            header: vec!["Pod".into(), "Node".into(), "Preempted".into()],
            rows: placed,
        }],
        pending: pending_of(&report),
    })
}

/// `--pod-template`: how many copies fit.
fn capacity_page(req: &Request<'_>, t: &PodTemplate) -> Result<HtmlReport, String> {
    let (answer, details) = capacity::how_many_fit_detailed(
        req.objects,
        req.loaded,
        req.seed,
        t,
        req.max,
        req.extenders,
    )
    .map_err(|e| e.to_string())?;
    let before = simulate::usage_before(req.objects);
    let mut pending = pending_of(&details.simulation);
    let copy = if answer.gang.is_some() {
        "gang"
    } else {
        "copy"
    };
    let stop = match &answer.stopped_by {
        Stop::Unschedulable { message } => format!("The next {copy} does not fit: {message}"),
        Stop::MaxReached => format!(
            "Stopped by --max {}, not by a failure: more copies may fit.",
            answer.max.unwrap_or(answer.placed)
        ),
        Stop::Gated { message } => format!("The copies never reach a scheduling cycle: {message}"),
        Stop::Error { message } => format!("The next copy failed with an error: {message}"),
    };
    if let Stop::Unschedulable { message } = &answer.stopped_by {
        pending.push(PendingPod {
            pod: match &answer.gang {
                Some(g) => format!("{}/{} (the next gang)", t.namespace, g.pod_group),
                None => format!("{}/{} (the next copy)", t.namespace, t.name),
            },
            reason: message.clone(),
        });
    }
    let tmpl = &answer.template;
    Ok(HtmlReport {
        title: "ferrosched simulate --pod-template".into(),
        question: match &answer.gang {
            Some(g) => format!(
                "How many whole gangs of PodGroup {}/{} ({} pods of {} {}/{}) fit (profile {}, config {})?",
                tmpl.namespace,
                g.pod_group,
                g.min_count,
                tmpl.kind,
                tmpl.namespace,
                tmpl.name,
                tmpl.profile,
                req.config_name
            ),
            None => format!(
                "How many copies of {} {}/{} fit (profile {}, config {})?",
                tmpl.kind, tmpl.namespace, tmpl.name, tmpl.profile, req.config_name
            ),
        },
        answer: vec![
            format!(
                "{} {}cop{} fit{}.",
                answer.placed,
                if answer.gang.is_some() {
                    "whole gang "
                } else {
                    ""
                },
                if answer.placed == 1 { "y" } else { "ies" },
                if matches!(answer.stopped_by, Stop::MaxReached) {
                    " (at least; --max reached)"
                } else {
                    ""
                }
            ),
            stop,
            format!(
                "The dump's pending pods first: {} of {} scheduled.",
                answer.pending.scheduled, answer.pending.total
            ),
        ],
        labels: [
            "before (the dump's bound pods)".into(),
            "after the pending pods and the copies".into(),
        ],
        nodes: NodeBars::pair(&before, &details.nodes_after),
        tables: vec![
            Table {
                caption: if answer.gang.is_some() {
                    "Gang pods per node".into()
                } else {
                    "Copies per node".into()
                },
                header: vec!["Node".into(), "Copies".into()],
                rows: answer
                    .nodes
                    .iter()
                    .map(|n| vec![n.node.clone(), n.copies.to_string()])
                    .collect(),
            },
            Table {
                caption: "Gangs placed".into(),
                header: vec!["PodGroup".into(), "Pods and nodes".into()],
                rows: answer
                    .gangs
                    .iter()
                    .map(|g| {
                        let pods: Vec<String> = g
                            .members
                            .iter()
                            .map(|(p, n)| format!("{p} \u{2192} {n}"))
                            .collect();
                        vec![g.pod_group.clone(), pods.join(", ")]
                    })
                    .collect(),
            },
        ]
        .into_iter()
        .filter(|t| answer.gang.is_some() || t.caption != "Gangs placed")
        .collect(),
        pending,
    })
}

/// The dump's pods left unplaced, with why.
fn pending_of(report: &simulate::Report) -> Vec<PendingPod> {
    report
        .outcomes
        .iter()
        .filter_map(|o| {
            let reason = match &o.result {
                PodResult::Scheduled { .. } => return None,
                PodResult::Unschedulable { message } => message.clone(),
                PodResult::Gated { message } => format!("Gated: {message}"),
                PodResult::Ignored { reason } => format!("Ignored: {reason}"),
                PodResult::Rejected { reason } => format!("Rejected: {reason}"),
                PodResult::Error { message } => format!("Error: {message}"),
            };
            Some(PendingPod {
                pod: o.pod.clone(),
                reason,
            })
        })
        .collect()
}
