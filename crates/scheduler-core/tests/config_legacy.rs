//! The legacy single-profile form (v1alpha1) converts into one v1 profile (Multi
//! Scheduling Profiles KEP), with a warning saying what moved.

use scheduler_core::config::*;
use scheduler_core::framework::ExtensionPoint::*;

const HEAD: &str =
    "apiVersion: kubescheduler.config.k8s.io/v1alpha1\nkind: KubeSchedulerConfiguration\n";

fn load(body: &str) -> Result<Loaded, ConfigErrors> {
    load_str(&format!("{HEAD}{body}"), "legacy.yaml")
}

#[test]
fn single_profile_fields_move_into_profiles_0() {
    let l = load(
        "schedulerName: my-scheduler
hardPodAffinitySymmetricWeight: 10
percentageOfNodesToScore: 50
bindTimeoutSeconds: 30
disablePreemption: true
leaderElection:
  leaderElect: true
  lockObjectNamespace: kube-system
  lockObjectName: my-lock
plugins:
  postFilter:
    disabled:
    - name: NodeAffinity
  score:
    disabled:
    - name: ImageLocality
pluginConfig:
- name: NodeResourcesFit
  args:
    ignoredResources: [example.com/foo]
",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let c = &l.config;
    assert_eq!(c.profiles.len(), 1);
    let p = &c.profiles[0];
    assert_eq!(p.scheduler_name, "my-scheduler");
    assert_eq!(c.percentage_of_nodes_to_score, Some(50));
    assert_eq!(c.leader_election.resource_name, "my-lock");
    assert_eq!(
        p.args("InterPodAffinity"),
        Some(&PluginArgs::InterPodAffinity(InterPodAffinityArgs {
            hard_pod_affinity_weight: 10,
            ignore_preferred_terms_of_existing_pods: false
        }))
    );
    assert_eq!(
        p.args("VolumeBinding"),
        Some(&PluginArgs::VolumeBinding(VolumeBindingArgs {
            bind_timeout_seconds: 30,
            shape: default_volume_binding_shape()
        }))
    );
    let Some(PluginArgs::NodeResourcesFit(fit)) = p.args("NodeResourcesFit") else {
        panic!()
    };
    assert_eq!(fit.ignored_resources, ["example.com/foo"]);
    let e = &l.profiles[0];
    // v1alpha1's postFilter was today's preScore.
    assert!(!e.plugins_at(PreScore).contains(&"NodeAffinity".to_string()));
    assert!(e.plugins_at(Score).contains(&"NodeAffinity".to_string()));
    assert!(!e.plugins_at(Score).contains(&"ImageLocality".to_string()));
    // disablePreemption turns off preemption only; DRA's deallocation stays.
    assert_eq!(
        e.plugins_at(PostFilter),
        ["DynamicResources".to_string()],
        "disablePreemption"
    );

    assert_eq!(l.warnings.len(), 1, "{:?}", l.warnings);
    let w = &l.warnings[0];
    assert_eq!(w.path, "apiVersion");
    assert_eq!(w.line, Some(1));
    for moved in [
        "schedulerName -> profiles[0].schedulerName",
        "hardPodAffinitySymmetricWeight -> InterPodAffinity args hardPodAffinityWeight",
        "bindTimeoutSeconds -> VolumeBinding args bindTimeoutSeconds",
        "disablePreemption: true -> DefaultPreemption disabled at postFilter",
        "leaderElection.lockObjectName -> leaderElection.resourceName",
    ] {
        assert!(
            w.message.contains(moved),
            "{moved} missing from {}",
            w.message
        );
    }

    // The converted config prints as v1 and loads back to the same thing.
    let v1 = to_yaml(c);
    assert_eq!(load_str(&v1, "v1.yaml").unwrap().config, *c);
}

#[test]
fn weight_plus_explicit_inter_pod_affinity_args_is_a_duplicate() {
    // Upstream appended a second InterPodAffinity config, which then failed as repeated.
    let e = load(
        "hardPodAffinitySymmetricWeight: 10
pluginConfig:
- name: InterPodAffinity
  args:
    hardPodAffinityWeight: 5
",
    )
    .unwrap_err();
    assert_eq!(e.len(), 1, "{e}");
    assert_eq!(e.0[0].path, "hardPodAffinitySymmetricWeight");
    assert_eq!(e.0[0].line, Some(3));
    assert_eq!(e.0[0].message, "Duplicate value: \"InterPodAffinity\"");
}

#[test]
fn converted_weight_is_validated_where_it_was_written() {
    let e = load("schedulerName: s\nhardPodAffinitySymmetricWeight: 101\n").unwrap_err();
    assert_eq!(e.0[0].path, "hardPodAffinitySymmetricWeight");
    assert_eq!(e.0[0].line, Some(4));
    assert_eq!(
        e.0[0].message,
        "Invalid value: 101: not in valid range [0, 100]"
    );
}

#[test]
fn legacy_paths_show_as_written() {
    let e = load("plugins:\n  score:\n    enabled:\n    - name: NodePortz\n").unwrap_err();
    assert_eq!(e.0[0].path, "plugins.score.enabled[0].name");
    assert_eq!(e.0[0].line, Some(6));
    assert_eq!(e.0[0].fix.as_deref(), Some("did you mean `NodePorts`?"));
    let e = load("plugins:\n  postFilter:\n    enabled:\n    - name: NodePorts\n").unwrap_err();
    assert_eq!(e.0[0].path, "plugins.postFilter.enabled[0].name");
    assert_eq!(
        e.0[0].message,
        "plugin \"NodePorts\" does not extend PreScorePlugin plugin"
    );
    let e = load("schedulerNmae: x\n").unwrap_err();
    assert_eq!(e.0[0].path, "schedulerNmae");
    assert_eq!(e.0[0].fix.as_deref(), Some("did you mean `schedulerName`?"));
}

#[test]
fn algorithm_source_policy_is_rejected() {
    let e =
        load("algorithmSource:\n  policy:\n    file:\n      path: /etc/policy.json\n").unwrap_err();
    assert_eq!(e.0[0].path, "algorithmSource");
    assert_eq!(e.0[0].line, Some(3));
    assert_eq!(e.0[0].message, message::ALGORITHM_SOURCE);
    assert_eq!(e.0[0].fix.as_deref(), Some(message::ALGORITHM_SOURCE_FIX));
    let e = load("algorithmSource:\n  provider: ClusterAutoscalerProvider\n").unwrap_err();
    assert_eq!(e.0[0].message, message::ALGORITHM_SOURCE);
    // The default provider is what v1 defaults do anyway.
    let l = load("algorithmSource:\n  provider: DefaultProvider\n").unwrap();
    assert!(l.warnings.iter().any(|w| w.path == "algorithmSource"));
}

#[test]
fn unreserve_and_lock_conflicts_are_errors() {
    let e = load("plugins:\n  unreserve:\n    enabled:\n    - name: VolumeBinding\n").unwrap_err();
    assert_eq!(e.0[0].path, "plugins.unreserve");
    assert_eq!(e.0[0].fix.as_deref(), Some(message::UNRESERVE_FIX));
    let e = load("leaderElection:\n  resourceName: a\n  lockObjectName: b\n").unwrap_err();
    assert_eq!(e.0[0].path, "leaderElection.lockObjectName");
    assert_eq!(e.0[0].line, Some(5));
}

#[test]
fn ignored_legacy_fields_warn() {
    let l = load("healthzBindAddress: 0.0.0.0:10251\nmetricsBindAddress: 0.0.0.0:10251\n").unwrap();
    let paths: Vec<&str> = l.warnings.iter().map(|w| w.path.as_str()).collect();
    assert_eq!(
        paths,
        ["healthzBindAddress", "metricsBindAddress", "apiVersion"]
    );
    assert_eq!(l.config, {
        let mut d = default_config();
        d.profiles[0].scheduler_name = "default-scheduler".into();
        d
    });
}
