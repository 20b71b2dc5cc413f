//! multiPoint expansion semantics (upstream `TestNewFrameworkMultiPointExpansion`
//! scenarios, rewritten on ferrosched's catalog).

use scheduler_core::config::*;
use scheduler_core::framework::ExtensionPoint::{self, *};

fn load(profile: &str) -> Loaded {
    let text = format!(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: p\n{profile}"
    );
    load_str(&text, "t.yaml").unwrap_or_else(|e| panic!("{e}"))
}

fn at(l: &Loaded, p: ExtensionPoint) -> Vec<&str> {
    l.profiles[0]
        .plugins_at(p)
        .iter()
        .map(String::as_str)
        .collect()
}

const DEFAULT_SCORE: [&str; 9] = [
    "TaintToleration",
    "NodeAffinity",
    "NodeResourcesFit",
    "VolumeBinding",
    "PodTopologySpread",
    "InterPodAffinity",
    "DynamicResources",
    "NodeResourcesBalancedAllocation",
    "ImageLocality",
];

#[test]
fn disabling_at_one_point_keeps_the_others() {
    let l = load(
        "  plugins:\n    preScore:\n      disabled:\n      - name: NodeAffinity\n    score:\n      disabled:\n      - name: ImageLocality\n",
    );
    assert!(!at(&l, PreScore).contains(&"NodeAffinity"));
    assert!(at(&l, Score).contains(&"NodeAffinity"));
    assert!(!at(&l, Score).contains(&"ImageLocality"));
    assert!(at(&l, Filter).contains(&"NodeAffinity"));
    assert_eq!(l.profiles[0].weight("ImageLocality"), None);
}

#[test]
fn star_at_a_point_skips_expansion_there() {
    let l = load(
        "  plugins:\n    filter:\n      enabled:\n      - name: NodeName\n      disabled:\n      - name: '*'\n",
    );
    assert_eq!(at(&l, Filter), ["NodeName"]);
    // Other points still expand.
    assert_eq!(at(&l, Score), DEFAULT_SCORE);
}

#[test]
fn star_in_multi_point_drops_defaults_and_keeps_custom_order() {
    let l = load(
        "  plugins:\n    multiPoint:\n      enabled:\n      - name: DefaultBinder\n      - name: PrioritySort\n      - name: TaintToleration\n        weight: 4\n      - name: NodeName\n      disabled:\n      - name: '*'\n",
    );
    assert_eq!(at(&l, Filter), ["TaintToleration", "NodeName"]);
    assert_eq!(at(&l, QueueSort), ["PrioritySort"]);
    assert_eq!(at(&l, Bind), ["DefaultBinder"]);
    assert_eq!(at(&l, PreFilter), Vec::<&str>::new());
    assert_eq!(
        l.profiles[0].score_weights,
        vec![("TaintToleration".to_string(), 4)]
    );
}

#[test]
fn overriding_a_weight_at_score_moves_the_plugin_first() {
    let l = load(
        "  plugins:\n    score:\n      enabled:\n      - name: ImageLocality\n        weight: 5\n",
    );
    let mut want = vec!["ImageLocality"];
    want.extend(DEFAULT_SCORE.iter().filter(|n| **n != "ImageLocality"));
    assert_eq!(at(&l, Score), want);
    assert_eq!(l.profiles[0].weight("ImageLocality"), Some(5));
    assert_eq!(l.profiles[0].weight("TaintToleration"), Some(3));
}

#[test]
fn overrides_keep_their_order_then_multi_point_then_the_rest() {
    let l = load(
        "  plugins:
    multiPoint:
      disabled:
      - name: NodeResourcesBalancedAllocation
    score:
      enabled:
      - name: NodeResourcesBalancedAllocation
        weight: 4
      - name: InterPodAffinity
        weight: 3
      - name: TaintToleration
",
    );
    assert_eq!(
        at(&l, Score),
        [
            "InterPodAffinity",
            "TaintToleration",
            "NodeAffinity",
            "NodeResourcesFit",
            "VolumeBinding",
            "PodTopologySpread",
            "DynamicResources",
            "ImageLocality",
            "NodeResourcesBalancedAllocation",
        ]
    );
    let w = &l.profiles[0];
    assert_eq!(w.weight("InterPodAffinity"), Some(3));
    // The score entry is seen first and has no weight, so it is 1, not multiPoint's 3.
    assert_eq!(w.weight("TaintToleration"), Some(1));
    assert_eq!(w.weight("NodeResourcesBalancedAllocation"), Some(4));
    // Disabled in multiPoint, so gone from PreScore, where nothing re-enables it.
    assert!(!at(&l, PreScore).contains(&"NodeResourcesBalancedAllocation"));
}

#[test]
fn enabled_and_disabled_in_multi_point_means_enabled_last() {
    let l = load(
        "  plugins:\n    multiPoint:\n      enabled:\n      - name: ImageLocality\n      disabled:\n      - name: ImageLocality\n",
    );
    assert_eq!(at(&l, Score).last(), Some(&"ImageLocality"));
    assert_eq!(l.profiles[0].weight("ImageLocality"), Some(1));
}

#[test]
fn custom_multi_point_plugins_follow_defaults() {
    let l = load("  plugins:\n    multiPoint:\n      enabled:\n      - name: SchedulingPolicy\n");
    assert_eq!(
        at(&l, PreEnqueue),
        [
            "SchedulingGates",
            "DynamicResources",
            "GangScheduling",
            "SchedulingPolicy"
        ]
    );
}

#[test]
fn double_registration_in_multi_point() {
    let text = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- plugins:\n    multiPoint:\n      enabled:\n      - name: ImageLocality\n      - name: ImageLocality\n";
    let e = load_str(text, "t.yaml").unwrap_err();
    assert_eq!(e.len(), 1, "{e}");
    assert_eq!(
        e.0[0].path,
        "profiles[0].plugins.multiPoint.enabled[1].name"
    );
    assert_eq!(e.0[0].line, Some(8));
    assert!(e.0[0].message.contains("already registered"));

    // The same through the pure expansion API on a hand-built profile.
    let mut p = default_config().profiles.remove(0);
    p.plugins
        .multi_point
        .enabled
        .push(PluginRef::new("ImageLocality", None));
    let errs = expand(&p).unwrap_err();
    assert_eq!(errs.len(), 1);
    assert_eq!(errs[0].path, "plugins.multiPoint.enabled[24]");
    assert_eq!(
        errs[0].message,
        "plugin \"ImageLocality\" already registered as \"ScorePlugin\""
    );
}

#[test]
fn every_profile_needs_one_queue_sort_and_a_binder() {
    let text = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- schedulerName: empty\n  plugins:\n    multiPoint:\n      disabled:\n      - name: '*'\n";
    let e = load_str(text, "t.yaml").unwrap_err();
    let got: Vec<(&str, &str)> = e
        .iter()
        .map(|e| (e.path.as_str(), e.message.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            (
                "profiles[0].plugins.queueSort",
                "only one queue sort plugin required for profile with scheduler name \"empty\", but got 0"
            ),
            (
                "profiles[0].plugins.bind",
                "at least one bind plugin is needed for profile with scheduler name \"empty\""
            ),
        ]
    );
    assert!(e.iter().all(|e| e.line == Some(5)), "{e}");
}

#[test]
fn expand_reports_unknown_plugins() {
    let mut p = default_config().profiles.remove(0);
    p.plugins
        .score
        .enabled
        .push(PluginRef::new("Nope", Some(1)));
    let errs = expand(&p).unwrap_err();
    assert_eq!(errs[0].message, "ScorePlugin \"Nope\" does not exist");
    assert_eq!(errs[0].source, "profile \"default-scheduler\"");
}

#[test]
fn negative_weight_through_expand() {
    let mut p = default_config().profiles.remove(0);
    p.plugins.multi_point.enabled[5].weight = Some(-3); // TaintToleration
    let errs = expand(&p).unwrap_err();
    assert_eq!(errs[0].path, "plugins.multiPoint.enabled[5].weight");
    assert!(errs[0].message.contains(message::NEGATIVE_WEIGHT));
}
