//! `ferrosched`: a fast, compatible replacement for kube-scheduler.
#![forbid(unsafe_code)]

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod cmd;

// Cheaper small allocations than glibc malloc and no per-thread arenas holding freed
// memory. Off with `--no-default-features` (glibc malloc, e.g. for heaptrack).
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// A fast, compatible replacement for kube-scheduler.
///
/// ferrosched reads the same KubeSchedulerConfiguration (kubescheduler.config.k8s.io/v1) as
/// kube-scheduler, runs one framework per profile, and schedules pods whose
/// spec.schedulerName names one of its profiles.
#[derive(Parser, Debug)]
#[command(
    name = "ferrosched",
    version,
    propagate_version = true,
    max_term_width = 100
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Check and print scheduler configuration files.
    #[command(subcommand)]
    Config(cmd::config::ConfigCommand),
    /// Schedule pending pods of a cluster dump (or the built-in example) offline with the
    /// real scheduling framework, and show where each lands or why it cannot.
    // Help is not wrapped here, so the dump command in it stays one line to copy.
    #[command(term_width = 0)]
    Simulate(cmd::simulate::SimulateArgs),
    /// Run scheduler_perf-like workloads in memory and report pods/s, attempt latency and
    /// peak RSS per workload; with --kubeconfig, against an API server with `ferrosched run`
    /// as the scheduler (pods/s, throughput percentiles, scheduler CPU and peak RSS).
    Bench(cmd::bench::BenchArgs),
    /// Explain why a pod of a live cluster is pending, or why it landed where it is: every
    /// node's verdict, the scores, preemption and what would have to change. Read only.
    Explain(cmd::explain::ExplainArgs),
    /// Watch a Kubernetes cluster and schedule its pending pods (bindings, events and
    /// PodScheduled conditions as kube-scheduler writes them).
    Run(cmd::run::RunArgs),
    /// Serve the SchedulingPolicy admission webhook over HTTPS: defaults for unset
    /// scheduling fields (/mutate), rejection of pods outside the policies their service
    /// account may use (/validate).
    Webhook(cmd::webhook::WebhookArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Config(c) => cmd::config::run(c),
        Command::Simulate(a) => cmd::simulate::run(&a),
        Command::Bench(a) => cmd::bench::run(&a),
        Command::Explain(a) => cmd::explain::run(&a),
        Command::Run(a) => cmd::run::run(&a),
        Command::Webhook(a) => cmd::webhook::run(&a),
    }
}
