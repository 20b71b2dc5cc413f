//! Every example in the workspace's `config/` directory loads cleanly, and the deliberately
//! broken one reports all of its mistakes with their lines.

use std::path::PathBuf;

use scheduler_core::config::*;
use scheduler_core::framework::ExtensionPoint;

fn config_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../config")
}

#[test]
fn every_example_loads_without_errors_or_warnings() {
    let mut seen = 0;
    for entry in std::fs::read_dir(config_dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("yaml")
            || path.file_name().unwrap() == "broken-example.yaml"
        {
            continue;
        }
        let loaded = load_file(&path).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            loaded.warnings.is_empty(),
            "{}: {:?}",
            path.display(),
            loaded.warnings
        );
        seen += 1;
    }
    assert!(seen >= 3, "expected the example configs, found {seen}");
}

#[test]
fn default_yaml_is_the_default_config() {
    let loaded = load_file(&config_dir().join("default.yaml")).unwrap();
    assert_eq!(loaded.config, default_config());
}

#[test]
fn bin_packing_profile() {
    let l = load_file(&config_dir().join("bin-packing.yaml")).unwrap();
    let names: Vec<&str> = l
        .profiles
        .iter()
        .map(|p| p.scheduler_name.as_str())
        .collect();
    assert_eq!(names, ["default-scheduler", "bin-packing"]);
    let bp = &l.profiles[1];
    let score = bp.plugins_at(ExtensionPoint::Score);
    assert!(
        !score
            .iter()
            .any(|n| n == "PodTopologySpread" || n == "NodeResourcesBalancedAllocation")
    );
    // Hard spreading constraints still apply.
    assert!(
        bp.plugins_at(ExtensionPoint::Filter)
            .iter()
            .any(|n| n == "PodTopologySpread")
    );
    assert_eq!(bp.weight("NodeResourcesFit"), Some(5));
    let Some(Some(PluginArgs::NodeResourcesFit(fit))) = bp.plugin_args.get("NodeResourcesFit")
    else {
        panic!()
    };
    assert_eq!(
        fit.scoring_strategy.as_ref().unwrap().type_,
        ScoringStrategyType::MostAllocated
    );
    // The default profile keeps spreading.
    assert!(
        l.profiles[0]
            .plugins_at(ExtensionPoint::Score)
            .iter()
            .any(|n| n == "PodTopologySpread")
    );
}

#[test]
fn runtimeclass_profiles_confine_pods() {
    let l = load_file(&config_dir().join("runtimeclass-sandboxes.yaml")).unwrap();
    let win = l
        .config
        .profiles
        .iter()
        .find(|p| p.scheduler_name == "windows-scheduler")
        .unwrap();
    let Some(PluginArgs::NodeAffinity(a)) = win.args("NodeAffinity") else {
        panic!()
    };
    let terms = &a
        .added_affinity
        .as_ref()
        .unwrap()
        .required_during_scheduling_ignored_during_execution
        .as_ref()
        .unwrap()
        .node_selector_terms;
    let req = &terms[0].match_expressions.as_ref().unwrap()[0];
    assert_eq!(req.key, "kubernetes.io/os");
    assert_eq!(req.values.as_deref(), Some(&["windows".to_string()][..]));
    assert_eq!(l.profiles[2].weight("ImageLocality"), Some(3));
    assert!(
        l.profiles[1]
            .plugins_at(ExtensionPoint::Filter)
            .iter()
            .any(|n| n == "RuntimeClass")
    );
}

#[test]
fn broken_example_reports_every_error_with_its_line() {
    let path = config_dir().join("broken-example.yaml");
    let errs = load_file(&path).unwrap_err();
    let got: Vec<(&str, Option<u32>)> = errs.iter().map(|e| (e.path.as_str(), e.line)).collect();
    assert_eq!(
        got,
        [
            ("profiles[1].schedulerNmae", Some(12)),
            ("profiles[1].schedulerName", Some(12)),
            ("profiles[1].plugins.score.enabled[0].name", Some(16)),
            (
                "profiles[1].pluginConfig[0].args.hardPodAffinityWeight",
                Some(21)
            ),
            ("profiles[2].schedulerName", Some(22)),
        ],
        "{errs}"
    );
    let text = errs.to_string();
    assert!(
        text.starts_with("5 errors in scheduler configuration "),
        "{text}"
    );
    assert!(text.contains("did you mean `schedulerName`?"));
    assert!(text.contains("did you mean `NodeResourcesFit`?"));
    assert!(text.contains("Invalid value: 150: not in valid range [0, 100]"));
    assert!(text.contains("Duplicate value: \"default-scheduler\""));
    for e in errs.iter() {
        assert!(e.source.ends_with("broken-example.yaml"));
        assert!(e.column.is_some());
    }
}
