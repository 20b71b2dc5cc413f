//! `ferrosched config validate|print`.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use scheduler_core::config::{self, Loaded};
use scheduler_core::framework::{ProfileRegistry, Registry};

#[derive(Subcommand, Debug)]
pub enum ConfigCommand {
    /// Validate a config file: print one line per profile, or every error with its line and
    /// column, and exit 1.
    Validate {
        /// KubeSchedulerConfiguration file (YAML or JSON).
        file: PathBuf,
    },
    /// Print the fully defaulted configuration as YAML, as kube-scheduler logs it at start.
    Print(PrintArgs),
}

#[derive(Args, Debug)]
pub struct PrintArgs {
    /// KubeSchedulerConfiguration file (YAML or JSON). Without it, the built-in default,
    /// shaped by the two legacy flags below.
    file: Option<PathBuf>,
    /// Legacy: name of the single default profile (ignored with a config file, like kube-scheduler).
    #[arg(long, value_name = "NAME", conflicts_with = "file")]
    scheduler_name: Option<String>,
    /// Legacy: InterPodAffinity's hardPodAffinityWeight for the default profile (0-100).
    #[arg(long, value_name = "WEIGHT", conflicts_with = "file")]
    hard_pod_affinity_symmetric_weight: Option<i32>,
}

pub fn run(cmd: ConfigCommand) -> ExitCode {
    match cmd {
        ConfigCommand::Validate { file } => validate(&file),
        ConfigCommand::Print(args) => print(&args),
    }
}

/// Loads the config and builds every profile's framework, the same steps `run` takes
/// before it touches the cluster.
pub fn load_and_build(
    loaded: Result<Loaded, config::ConfigErrors>,
) -> Result<(Loaded, ProfileRegistry), String> {
    let loaded = loaded.map_err(|e| e.to_string())?;
    let profiles =
        ProfileRegistry::new(&loaded.profiles, &Registry::in_tree()).map_err(|e| e.to_string())?;
    Ok((loaded, profiles))
}

fn validate(file: &std::path::Path) -> ExitCode {
    match load_and_build(config::load_file(file)) {
        Ok((loaded, profiles)) => {
            let mut out = std::io::stdout().lock();
            for w in &loaded.warnings {
                let _ = writeln!(out, "warning: {w}");
            }
            for (name, fw) in profiles.iter() {
                let points = fw.list_plugins();
                let filters = points
                    .get(&scheduler_core::framework::ExtensionPoint::Filter)
                    .map_or(0, Vec::len);
                let scores = points
                    .get(&scheduler_core::framework::ExtensionPoint::Score)
                    .map(|v| {
                        v.iter()
                            .map(|(n, w)| format!("{n}:{}", w.unwrap_or(1)))
                            .collect::<Vec<_>>()
                            .join(",")
                    })
                    .unwrap_or_default();
                let _ = write!(
                    out,
                    "profile {name:?}: ok ({filters} filters; score {scores})"
                );
                if !fw.not_built().is_empty() {
                    let _ = write!(
                        out,
                        "; not built yet, skipped: {}",
                        fw.not_built().join(", ")
                    );
                }
                let _ = writeln!(out);
            }
            let _ = writeln!(
                out,
                "{}: valid, {} profile(s)",
                file.display(),
                profiles.len()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}

fn print(args: &PrintArgs) -> ExitCode {
    let loaded = match &args.file {
        Some(f) => config::load_file(f),
        None => config::from_flags(
            args.scheduler_name.as_deref(),
            args.hard_pod_affinity_symmetric_weight,
        ),
    };
    match loaded {
        Ok(l) => {
            for w in &l.warnings {
                eprintln!("warning: {w}");
            }
            print!("{}", config::to_yaml(&l.config));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}
