//! `ferrosched simulate`: schedule a cluster dump offline and show where every pod lands.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use scheduler_core::config;
use scheduler_core::explain;
use scheduler_core::simulate::{self, PodResult, Report};

use super::output::Output;
use super::report::{self as report, SimulateOutput};

#[derive(Args, Debug)]
#[command(after_help = format!(
    "Dump a cluster with every kind simulate reads (one line):\n  {}\nand, on clusters that serve DeviceTaintRules (1.37+), pass this file too:\n  {}\nand, on clusters that serve PodGroups (the Workload API, or scheduler-plugins' CRD), this one:\n  {}\nand, on clusters that serve CompositePodGroups (1.37 alpha), this one:\n  {}",
    simulate::DUMP_COMMAND,
    simulate::TAINT_RULES_DUMP_COMMAND,
    simulate::POD_GROUPS_DUMP_COMMAND,
    simulate::COMPOSITE_POD_GROUPS_DUMP_COMMAND
))]
pub struct SimulateArgs {
    /// KubeSchedulerConfiguration to schedule with. Default: the built-in example's config
    /// without --cluster, kube-scheduler's default profile with it.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Cluster objects: YAML/JSON files or directories (multi-document files and
    /// `kubectl get -o yaml` Lists) of every kind `run` watches; dump them with the command
    /// below. Without it, the built-in GPU case study runs.
    #[arg(long, value_name = "PATH", num_args = 1..)]
    cluster: Vec<PathBuf>,
    /// Output format; html is one self-contained page (docs/simulate.md).
    #[arg(long, short, value_enum, default_value_t = SimulateOutput::Table)]
    output: SimulateOutput,
    /// Explain each decision: every node's verdict (the first filter plugin that rejected
    /// it, or its weighted score per plugin), the choice, preemption and what would have to
    /// change. With NAMESPACE/POD, only that pod (its explanation alone with -o json|yaml);
    /// without, every pending pod.
    #[arg(
        long,
        value_name = "NAMESPACE/POD",
        num_args = 0..=1,
        default_missing_value = ""
    )]
    explain: Option<String>,
    /// With --explain: scored and rejected nodes listed per pod before the rest is
    /// summarised.
    #[arg(long, value_name = "N", default_value_t = explain::render::DEFAULT_MAX_ROWS)]
    explain_rows: usize,
    /// Seed for breaking score ties, so runs are repeatable.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Do not call the config's extenders: schedule as if they were absent (resources they
    /// manage with ignoredByScheduler stay ignored by NodeResourcesFit). Without it the
    /// extenders' filter, prioritize and preempt verbs are called, never bind.
    #[arg(long)]
    ignore_extenders: bool,
    /// How many copies of a pod fit: after the dump's pending pods, place copies of this
    /// Pod (or of the pod template of this Deployment, Job, ReplicaSet or StatefulSet) one
    /// after another until the next does not fit. Copies never preempt.
    #[arg(long, value_name = "FILE", conflicts_with = "explain")]
    pod_template: Option<PathBuf>,
    /// With --pod-template: stop after N copies (the answer is then "at least N").
    #[arg(long, value_name = "N", requires = "pod_template")]
    max: Option<usize>,
    #[command(flatten)]
    what_if: super::simulate_drain::WhatIfArgs,
    /// Run the same dump (and --pod-template copies) under this second config too and
    /// compare: pods placed differently, per-node usage, empty nodes, fragmentation.
    #[arg(
        long,
        value_name = "FILE",
        conflicts_with_all = ["explain", "drain", "drain_selector", "compress", "add_nodes"]
    )]
    compare_config: Option<PathBuf>,
    /// Read the cluster live instead of a dump: every kind `simulate` reads is listed once
    /// (read only, as `explain`), and without --config the running scheduler's config is
    /// read from --config-map.
    #[arg(long, value_name = "FILE", conflicts_with = "cluster")]
    kubeconfig: Option<PathBuf>,
    /// With --kubeconfig and no --config: the ConfigMap holding the running scheduler's
    /// config, as NAMESPACE/NAME:KEY.
    #[arg(
        long,
        value_name = "NAMESPACE/NAME:KEY",
        default_value = "kube-system/ferrosched-config:config.yaml",
        requires = "kubeconfig"
    )]
    config_map: String,
}

pub fn run(args: &SimulateArgs) -> ExitCode {
    if args.output == SimulateOutput::Html && args.explain.is_some() {
        eprintln!(
            "error: -o html does not show explanations; use --explain with -o table, json or yaml"
        );
        return ExitCode::FAILURE;
    }
    let (objects, loaded) = match load(args) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let template = match args
        .pod_template
        .as_deref()
        .map(simulate::capacity::load_template)
    {
        Some(Err(e)) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
        Some(Ok(t)) => Some(t),
        None => None,
    };
    let node_template = match args.what_if.check() {
        Ok(t) => t,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    let one = args.explain.as_deref().filter(|p| !p.is_empty());
    let wanted = |key: &str| one.is_none_or(|p| p == key);
    let explain: Option<&dyn Fn(&str) -> bool> = args.explain.as_ref().map(|_| &wanted as _);
    let configured = &loaded.config.extenders;
    // The runtime the extenders' calls run on; this thread waits for each answer.
    let mut runtime = None;
    let extenders = if configured.is_empty() {
        Vec::new()
    } else if args.ignore_extenders {
        eprintln!(
            "note: --ignore-extenders: the config's {} extender(s) are not called; pods are placed as if they were absent",
            configured.len()
        );
        Vec::new()
    } else {
        let rt = match tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
        {
            Ok(rt) => rt,
            Err(e) => {
                eprintln!("error: starting the extenders' runtime: {e}");
                return ExitCode::FAILURE;
            }
        };
        let built = match controller::extender::build_extenders(configured, rt.handle()) {
            Ok(b) => b,
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::FAILURE;
            }
        };
        let names: Vec<&str> = configured.iter().map(|e| e.url_prefix.as_str()).collect();
        eprintln!(
            "note: calling {} extender(s) ({}); their bind verbs are not called, simulate binds in memory (--ignore-extenders to leave them out)",
            configured.len(),
            names.join(", ")
        );
        runtime = Some(rt);
        controller::extender::as_core(&built)
    };
    let config_name = match (&args.config, args.cluster.is_empty()) {
        (Some(f), _) => f.display().to_string(),
        (None, _) if args.kubeconfig.is_some() => format!("the config in {}", args.config_map),
        (None, true) => "the built-in example's config".to_string(),
        (None, false) => "kube-scheduler's default config".to_string(),
    };
    let request = report::Request {
        objects: &objects,
        loaded: &loaded,
        config_name,
        compare_config: args.compare_config.as_deref(),
        template: template.as_ref(),
        max: args.max,
        seed: args.seed,
        extenders: &extenders,
        output: args.output,
        what_if: args.what_if.asked(),
    };
    if let Some(code) = report::answer(&request) {
        drop(runtime);
        return code;
    }
    let output = args.output.plain().unwrap_or(Output::Table);
    if let Some(template) = template {
        let answer = simulate::capacity::how_many_fit(
            &objects, &loaded, args.seed, &template, args.max, &extenders,
        );
        drop(runtime);
        return super::simulate_capacity::print(answer, output);
    }
    if args.what_if.asked() {
        let code = args.what_if.answer(
            &objects,
            &loaded,
            args.seed,
            node_template,
            &extenders,
            args.output,
        );
        drop(runtime);
        return code;
    }
    let report = simulate::run_with_extenders(&objects, &loaded, args.seed, explain, &extenders);
    drop(runtime);
    let report = match report {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let Some(pod) = one {
        return explain_one(&report, pod, args, output);
    }
    match output {
        Output::Table if args.explain.is_some() => {
            print!("{}", table(&report));
            for o in &report.outcomes {
                if let Some(e) = &o.explanation {
                    print!("\n{}", explain::render::render(e, args.explain_rows));
                }
            }
        }
        Output::Table => print!("{}", table(&report)),
        Output::Json => println!(
            "{}",
            serde_json::to_string_pretty(&report).expect("report serializes")
        ),
        Output::Yaml => print!(
            "{}",
            serde_saphyr::to_string(&report).expect("report serializes")
        ),
    }
    ExitCode::SUCCESS
}

/// Prints one pod's explanation, or says why there is none.
fn explain_one(report: &Report, pod: &str, args: &SimulateArgs, output: Output) -> ExitCode {
    let Some(o) = report.outcomes.iter().find(|o| o.pod == pod) else {
        let pending: Vec<&str> = report.outcomes.iter().map(|o| o.pod.as_str()).collect();
        eprintln!(
            "error: {pod:?} is not a pending pod of this cluster (already bound, finished, or absent); pending pods: {}",
            if pending.is_empty() {
                "none".to_string()
            } else {
                pending.join(", ")
            }
        );
        return ExitCode::FAILURE;
    };
    let Some(e) = &o.explanation else {
        let why = match &o.result {
            PodResult::Gated { message } => {
                format!("it never reached a scheduling cycle: {message}")
            }
            PodResult::Ignored { reason } => reason.clone(),
            PodResult::Rejected { reason } => format!("admission would reject it: {reason}"),
            _ => "it was not attempted".to_string(),
        };
        eprintln!("error: {pod} has no explanation: {why}");
        return ExitCode::FAILURE;
    };
    match output {
        Output::Table => print!("{}", explain::render::render(e, args.explain_rows)),
        Output::Json => println!("{}", serde_json::to_string_pretty(e).expect("serializes")),
        Output::Yaml => print!("{}", serde_saphyr::to_string(e).expect("serializes")),
    }
    ExitCode::SUCCESS
}

fn load(args: &SimulateArgs) -> Result<(simulate::ClusterObjects, config::Loaded), String> {
    if args.kubeconfig.is_some() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("error: starting a runtime to read the cluster: {e}"))?;
        let (objects, loaded) = rt
            .block_on(super::explain::fetch_cluster(
                args.kubeconfig.as_deref(),
                args.config.as_deref(),
                &args.config_map,
            ))
            .map_err(|e| format!("error: reading the cluster: {e}"))?;
        for w in &loaded.warnings {
            eprintln!("{w}");
        }
        return Ok((objects, loaded));
    }
    let builtin = args.cluster.is_empty();
    let objects = if builtin {
        simulate::load_str(simulate::CASE_STUDY_CLUSTER, "<built-in case study>")
            .map_err(|e| simulate::describe_errors(&e))?
    } else {
        simulate::load_paths(&args.cluster).map_err(|e| simulate::describe_errors(&e))?
    };
    let loaded = match (&args.config, builtin) {
        (Some(f), _) => config::load_file(f),
        (None, true) => config::load_str(simulate::CASE_STUDY_CONFIG, "<built-in config>"),
        (None, false) => config::from_flags(None, None),
    }
    .map_err(|e| e.to_string())?;
    for w in &loaded.warnings {
        eprintln!("{w}");
    }
    Ok((objects, loaded))
}

/// The human-readable report: one line per pod, then per-node utilisation.
pub fn table(r: &Report) -> String {
    let mut out = String::new();
    let pod_w = crate::cmd::output::column_width(r.outcomes.iter().map(|o| o.pod.len()), 3);
    let prof_w = crate::cmd::output::column_width(
        r.outcomes
            .iter()
            .map(|o| o.profile.as_deref().unwrap_or("-").len()),
        7,
    );
    let _ = writeln!(
        out,
        "{:pod_w$}  {:prof_w$}  {:>8}  RESULT",
        "POD", "PROFILE", "PRIORITY"
    );
    for o in &r.outcomes {
        let result = match &o.result {
            PodResult::Scheduled { node, preempted } if preempted.is_empty() => {
                format!("-> {node}")
            }
            PodResult::Scheduled { node, preempted } => {
                format!("-> {node} (preempted {})", preempted.join(", "))
            }
            PodResult::Unschedulable { message } => format!("Unschedulable: {message}"),
            PodResult::Gated { message } => format!("Gated: {message}"),
            PodResult::Ignored { reason } => format!("Ignored: {reason}"),
            PodResult::Rejected { reason } => format!("Rejected: {reason}"),
            PodResult::Error { message } => format!("Error: {message}"),
        };
        let profile = o.profile.as_deref().unwrap_or("-");
        let _ = writeln!(
            out,
            "{:pod_w$}  {profile:prof_w$}  {:>8}  {result}",
            o.pod, o.priority
        );
        for d in &o.devices {
            let _ = writeln!(out, "{:pod_w$}  device: {d}", "");
        }
        if !o.missing_from_dump.is_empty() {
            let _ = writeln!(
                out,
                "{:pod_w$}  missing from the dump: {}",
                "",
                o.missing_from_dump.join(", ")
            );
        }
    }
    let _ = writeln!(
        out,
        "\n{} of {} pending pod(s) scheduled.\n",
        r.scheduled(),
        r.outcomes.len()
    );

    let node_w = crate::cmd::output::column_width(r.nodes.iter().map(|n| n.node.len()), 4);
    let _ = writeln!(
        out,
        "{:node_w$}  {:>9}  {:>19}  {:>24}  EXTENDED",
        "NODE", "PODS", "CPU", "MEMORY"
    );
    for n in &r.nodes {
        // Resources a node has none of and nobody asks for (hugepages on most nodes) are noise.
        let ext: Vec<String> = n
            .extended
            .iter()
            .filter(|(_, (req, alloc))| *req != 0 || *alloc != 0)
            .map(|(k, (req, alloc))| format!("{k} {req}/{alloc}"))
            .collect();
        let _ = writeln!(
            out,
            "{:node_w$}  {:>9}  {:>19}  {:>24}  {}",
            n.node,
            format!("{}/{}", n.pods, n.max_pods),
            format!(
                "{}m/{}m {:>3}%",
                n.cpu_milli,
                n.cpu_allocatable_milli,
                pct(n.cpu_milli, n.cpu_allocatable_milli)
            ),
            format!(
                "{}/{} {:>3}%",
                mib(n.memory),
                mib(n.memory_allocatable),
                pct(n.memory, n.memory_allocatable)
            ),
            if ext.is_empty() {
                "-".to_string()
            } else {
                ext.join(", ")
            },
        );
    }
    if !r.skipped_kinds.is_empty() {
        let kinds: Vec<String> = r
            .skipped_kinds
            .iter()
            .map(|(k, n)| format!("{n} {k}"))
            .collect();
        let _ = writeln!(out, "\nNot used for scheduling: {}.", kinds.join(", "));
    }
    out
}

fn pct(a: i64, b: i64) -> i64 {
    if b <= 0 { 0 } else { a * 100 / b }
}

fn mib(bytes: i64) -> String {
    format!("{}Mi", bytes / (1024 * 1024))
}
