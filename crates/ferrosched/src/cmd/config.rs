//! `ferrosched config validate|print`.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use scheduler_core::config::{self, Loaded};
use scheduler_core::framework::{ProfileRegistry, Registry};

mod configmap;

use super::output::Output;

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
    /// Output format: the config as YAML (default) or JSON, or a table of each profile's
    /// plugins per extension point, as wired.
    #[arg(long, short, value_enum, default_value_t = Output::Yaml)]
    output: Output,
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
    let text = match std::fs::read_to_string(file) {
        Ok(t) => t,
        // The loader words the error (with its fix) the way every command does.
        Err(_) => return report(file.display().to_string(), config::load_file(file)),
    };
    let source = file.display().to_string();
    match configmap::embedded_configs(&text, &source) {
        configmap::Found::NotAConfigMap => report(source.clone(), config::load_str(&text, &source)),
        configmap::Found::Problem(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
        configmap::Found::Configs(entries) => {
            let mut code = ExitCode::SUCCESS;
            for entry in entries {
                let loaded = config::load_str(&entry.text, &source).map_err(|mut e| {
                    e.0.iter_mut().for_each(|e| entry.relocate(e));
                    e
                });
                let loaded = loaded.map(|mut l| {
                    l.warnings
                        .iter_mut()
                        .for_each(|w| entry.relocate_warning(w));
                    l
                });
                if report(entry.label.clone(), loaded) != ExitCode::SUCCESS {
                    code = ExitCode::FAILURE;
                }
            }
            code
        }
    }
}

/// Prints one line per profile (in file order) and the verdict, or the errors.
fn report(label: String, loaded: Result<Loaded, config::ConfigErrors>) -> ExitCode {
    match load_and_build(loaded) {
        Ok((loaded, profiles)) => {
            let mut out = std::io::stdout().lock();
            for w in &loaded.warnings {
                // The warning's Display starts with "warning: ".
                let _ = writeln!(out, "{w}");
            }
            for p in &loaded.profiles {
                let name = &p.scheduler_name;
                let Some(fw) = profiles.for_scheduler_name(name) else {
                    continue;
                };
                let points = fw.list_plugins();
                let filters = points
                    .get(&scheduler_core::framework::ExtensionPoint::Filter)
                    .map_or(0, Vec::len);
                let scores = points
                    .get(&scheduler_core::framework::ExtensionPoint::Score)
                    .filter(|v| !v.is_empty())
                    .map(|v| {
                        let list: Vec<String> = v
                            .iter()
                            .map(|(n, w)| format!("{n}:{}", w.unwrap_or(1)))
                            .collect();
                        format!("score {}", list.join(","))
                    })
                    .unwrap_or_else(|| "no score plugins".to_string());
                let _ = write!(out, "profile {name:?}: ok ({filters} filters; {scores})");
                if !fw.not_built().is_empty() {
                    let _ = write!(
                        out,
                        "; not built yet, skipped: {}",
                        fw.not_built().join(", ")
                    );
                }
                let _ = writeln!(out);
            }
            let _ = writeln!(out, "{label}: valid, {} profile(s)", profiles.len());
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
                eprintln!("{w}");
            }
            let yaml = config::to_yaml(&l.config);
            match args.output {
                Output::Yaml => print!("{yaml}"),
                Output::Json => {
                    // The same document (and what /configz serves under "componentconfig").
                    let doc = config::to_json(&l.config);
                    print!("{}", Output::Json.serialize(&doc).unwrap_or_default());
                }
                Output::Table => match load_and_build(Ok(l)) {
                    Ok((loaded, profiles)) => print!("{}", plugin_table(&loaded, &profiles)),
                    Err(e) => {
                        eprintln!("{e}");
                        return ExitCode::FAILURE;
                    }
                },
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}

/// Each profile's plugins per extension point (weights on Score), in file order.
fn plugin_table(loaded: &Loaded, profiles: &ProfileRegistry) -> String {
    let mut rows: Vec<[String; 3]> = vec![["PROFILE".into(), "POINT".into(), "PLUGINS".into()]];
    for p in &loaded.profiles {
        let Some(fw) = profiles.for_scheduler_name(&p.scheduler_name) else {
            continue;
        };
        for (point, plugins) in fw.list_plugins() {
            let names: Vec<String> = plugins
                .iter()
                .map(|(n, w)| match w {
                    Some(w) => format!("{n}:{w}"),
                    None => n.to_string(),
                })
                .collect();
            rows.push([
                p.scheduler_name.clone(),
                format!("{point:?}"),
                names.join(", "),
            ]);
        }
    }
    let w0 = rows.iter().map(|r| r[0].len()).max().unwrap_or(0);
    let w1 = rows.iter().map(|r| r[1].len()).max().unwrap_or(0);
    rows.iter()
        .map(|r| format!("{:w0$}  {:w1$}  {}\n", r[0], r[1], r[2]))
        .collect()
}
