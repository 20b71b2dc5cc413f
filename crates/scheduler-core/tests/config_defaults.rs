//! The effective default configuration matches upstream v1 defaults field by field, with
//! ferrosched's documented plugin-list differences; to_yaml round-trips.

use std::time::Duration;

use scheduler_core::config::*;
use scheduler_core::framework::ExtensionPoint::{self, *};

fn names(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn global_defaults() {
    let c = default_config();
    assert_eq!(c.parallelism, 16);
    assert_eq!(c.percentage_of_nodes_to_score, Some(0));
    assert_eq!(c.pod_initial_backoff_seconds, 1);
    assert_eq!(c.pod_max_backoff_seconds, 10);
    assert!(c.enable_profiling);
    assert!(c.enable_contention_profiling);
    assert!(!c.delay_cache_until_active);
    assert!(c.extenders.is_empty());
    assert_eq!(
        c.leader_election,
        LeaderElectionConfiguration {
            leader_elect: true,
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
            resource_lock: "leases".into(),
            resource_name: "kube-scheduler".into(),
            resource_namespace: "kube-system".into(),
        }
    );
    assert_eq!(
        c.client_connection,
        ClientConnectionConfiguration {
            kubeconfig: String::new(),
            accept_content_types: String::new(),
            content_type: "application/vnd.kubernetes.protobuf".into(),
            qps: 50.0,
            burst: 100,
        }
    );
    assert_eq!(c.profiles.len(), 1);
    assert_eq!(c.profiles[0].scheduler_name, "default-scheduler");
    assert_eq!(c.profiles[0].percentage_of_nodes_to_score, None);
}

#[test]
fn contention_profiling_follows_profiling_when_unset() {
    let l = load_str(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nenableProfiling: false\n",
        "t",
    )
    .unwrap();
    assert!(!l.config.enable_profiling);
    assert!(!l.config.enable_contention_profiling);
}

#[test]
fn default_plugins_before_expansion() {
    let c = default_config();
    let p = &c.profiles[0].plugins;
    let want: Vec<PluginRef> = [
        ("SchedulingGates", None),
        ("PrioritySort", None),
        ("NodeUnschedulable", None),
        ("NodeName", None),
        ("NodeDeclaredFeatures", None),
        ("TaintToleration", Some(3)),
        ("NodeAffinity", Some(2)),
        ("RuntimeClass", None),
        ("NodePorts", None),
        ("NodeResourcesFit", Some(1)),
        ("VolumeRestrictions", None),
        ("NodeVolumeLimits", None),
        ("VolumeBinding", None),
        ("VolumeZone", None),
        ("PodTopologySpread", Some(2)),
        ("InterPodAffinity", Some(2)),
        ("DynamicResources", None),
        ("DefaultPreemption", None),
        ("NodeResourcesBalancedAllocation", Some(1)),
        ("ImageLocality", Some(1)),
        ("DefaultBinder", None),
        ("GangScheduling", None),
        ("TopologyPlacementGenerator", None),
        ("PodGroupPodsCount", Some(1)),
    ]
    .iter()
    .map(|(n, w)| PluginRef::new(n, *w))
    .collect();
    assert_eq!(p.multi_point.enabled, want);
    assert!(p.multi_point.disabled.is_empty());
    for point in ExtensionPoint::ALL {
        assert!(
            p.point(point).is_empty(),
            "{point} should be empty before expansion"
        );
    }
}

/// Upstream's `ExpandedPluginsV1` without EBS/GCEPD/AzureDisk limits, plus RuntimeClass
/// after NodeAffinity in PreFilter and Filter. DynamicResources' PostFilter (deallocation)
/// runs before DefaultPreemption, as upstream's.
#[test]
fn default_plugins_after_expansion() {
    let e = expand(&default_config().profiles[0]).unwrap();
    let want: &[(ExtensionPoint, &[&str])] = &[
        (
            PreEnqueue,
            &["SchedulingGates", "DynamicResources", "GangScheduling"],
        ),
        (QueueSort, &["PrioritySort"]),
        (
            PreFilter,
            &[
                "NodeDeclaredFeatures",
                "NodeAffinity",
                "RuntimeClass",
                "NodePorts",
                "NodeResourcesFit",
                "VolumeRestrictions",
                "NodeVolumeLimits",
                "VolumeBinding",
                "VolumeZone",
                "PodTopologySpread",
                "InterPodAffinity",
                "DynamicResources",
            ],
        ),
        (
            Filter,
            &[
                "NodeUnschedulable",
                "NodeName",
                "NodeDeclaredFeatures",
                "TaintToleration",
                "NodeAffinity",
                "RuntimeClass",
                "NodePorts",
                "NodeResourcesFit",
                "VolumeRestrictions",
                "NodeVolumeLimits",
                "VolumeBinding",
                "VolumeZone",
                "PodTopologySpread",
                "InterPodAffinity",
                "DynamicResources",
            ],
        ),
        (PostFilter, &["DynamicResources", "DefaultPreemption"]),
        (
            PreScore,
            &[
                "TaintToleration",
                "NodeAffinity",
                "NodeResourcesFit",
                "VolumeBinding",
                "PodTopologySpread",
                "InterPodAffinity",
                "NodeResourcesBalancedAllocation",
            ],
        ),
        (
            Score,
            &[
                "TaintToleration",
                "NodeAffinity",
                "NodeResourcesFit",
                "VolumeBinding",
                "PodTopologySpread",
                "InterPodAffinity",
                "DynamicResources",
                "NodeResourcesBalancedAllocation",
                "ImageLocality",
            ],
        ),
        (Reserve, &["VolumeBinding", "DynamicResources"]),
        (Permit, &[]),
        (PreBind, &["VolumeBinding", "DynamicResources"]),
        (Bind, &["DefaultBinder"]),
        (PostBind, &[]),
        (PlacementGenerate, &["TopologyPlacementGenerator"]),
        (PlacementScore, &["NodeResourcesFit", "PodGroupPodsCount"]),
    ];
    for (point, plugins) in want {
        assert_eq!(e.plugins_at(*point), names(plugins).as_slice(), "{point}");
    }
    assert_eq!(e.points.len(), 14);
    assert_eq!(
        e.placement_score_weights,
        vec![
            ("NodeResourcesFit".to_string(), 1),
            ("PodGroupPodsCount".to_string(), 1)
        ]
    );
    let weights: Vec<(String, i32)> = [
        ("TaintToleration", 3),
        ("NodeAffinity", 2),
        ("NodeResourcesFit", 1),
        ("VolumeBinding", 1),
        ("PodTopologySpread", 2),
        ("InterPodAffinity", 2),
        ("DynamicResources", 1),
        ("NodeResourcesBalancedAllocation", 1),
        ("ImageLocality", 1),
    ]
    .iter()
    .map(|(n, w)| (n.to_string(), *w))
    .collect();
    assert_eq!(e.score_weights, weights);
    assert_eq!(e.scheduler_name, "default-scheduler");
    // Every running plugin has an args entry; only plugins with an args kind have Some.
    assert_eq!(e.plugin_args.len(), 24);
    assert_eq!(e.plugin_args["RuntimeClass"], None);
    assert!(matches!(
        e.plugin_args["NodeResourcesFit"],
        Some(PluginArgs::NodeResourcesFit(_))
    ));
}

#[test]
fn default_plugin_args() {
    let c = default_config();
    let p = &c.profiles[0];
    let got: Vec<&str> = p.plugin_config.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        got,
        [
            "DefaultPreemption",
            "DynamicResources",
            "InterPodAffinity",
            "NodeAffinity",
            "NodeResourcesBalancedAllocation",
            "NodeResourcesFit",
            "PodTopologySpread",
            "VolumeBinding"
        ]
    );
    let cpu_mem = vec![ResourceSpec::new("cpu", 1), ResourceSpec::new("memory", 1)];
    assert_eq!(
        p.args("DefaultPreemption"),
        Some(&PluginArgs::DefaultPreemption(DefaultPreemptionArgs {
            min_candidate_nodes_percentage: 10,
            min_candidate_nodes_absolute: 100
        }))
    );
    assert_eq!(
        p.args("InterPodAffinity"),
        Some(&PluginArgs::InterPodAffinity(InterPodAffinityArgs {
            hard_pod_affinity_weight: 1,
            ignore_preferred_terms_of_existing_pods: false
        }))
    );
    assert_eq!(
        p.args("NodeAffinity"),
        Some(&PluginArgs::NodeAffinity(NodeAffinityArgs::default()))
    );
    assert_eq!(
        p.args("NodeResourcesBalancedAllocation"),
        Some(&PluginArgs::NodeResourcesBalancedAllocation(
            NodeResourcesBalancedAllocationArgs {
                resources: cpu_mem.clone()
            }
        ))
    );
    assert_eq!(
        p.args("NodeResourcesFit"),
        Some(&PluginArgs::NodeResourcesFit(NodeResourcesFitArgs {
            ignored_resources: vec![],
            ignored_resource_groups: vec![],
            scoring_strategy: Some(ScoringStrategy {
                type_: ScoringStrategyType::LeastAllocated,
                resources: cpu_mem,
                requested_to_capacity_ratio: None
            })
        }))
    );
    assert_eq!(
        p.args("PodTopologySpread"),
        Some(&PluginArgs::PodTopologySpread(PodTopologySpreadArgs {
            default_constraints: vec![],
            defaulting_type: PodTopologySpreadConstraintsDefaulting::System
        }))
    );
    assert_eq!(
        p.args("VolumeBinding"),
        Some(&PluginArgs::VolumeBinding(VolumeBindingArgs {
            bind_timeout_seconds: 600,
            // StorageCapacityScoring's default (on since 1.37).
            shape: vec![
                UtilizationShapePoint {
                    utilization: 0,
                    score: 10
                },
                UtilizationShapePoint {
                    utilization: 100,
                    score: 0
                }
            ]
        }))
    );
    assert_eq!(
        p.args("DynamicResources"),
        Some(&PluginArgs::DynamicResources(DynamicResourcesArgs {
            filter_timeout: std::time::Duration::from_secs(10),
            binding_timeout: std::time::Duration::from_secs(600),
        }))
    );
    assert_eq!(p.args("PrioritySort"), None);
}

#[test]
fn defaults_apply_inside_explicit_args() {
    let l = load_str(
        "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: MostAllocated
        resources:
        - name: cpu
          weight: 0
        - name: nvidia.com/gpu
          weight: 5
  - name: NodeResourcesBalancedAllocation
    args:
      resources:
      - name: cpu
  - name: DefaultPreemption
    args:
      minCandidateNodesAbsolute: 0
",
        "t",
    )
    .unwrap();
    let p = &l.config.profiles[0];
    let Some(PluginArgs::NodeResourcesFit(fit)) = p.args("NodeResourcesFit") else {
        panic!()
    };
    let s = fit.scoring_strategy.as_ref().unwrap();
    assert_eq!(s.type_, ScoringStrategyType::MostAllocated);
    assert_eq!(
        s.resources,
        vec![
            ResourceSpec::new("cpu", 1),
            ResourceSpec::new("nvidia.com/gpu", 5)
        ]
    );
    assert_eq!(
        p.args("NodeResourcesBalancedAllocation"),
        Some(&PluginArgs::NodeResourcesBalancedAllocation(
            NodeResourcesBalancedAllocationArgs {
                resources: vec![ResourceSpec::new("cpu", 1)]
            }
        ))
    );
    assert_eq!(
        p.args("DefaultPreemption"),
        Some(&PluginArgs::DefaultPreemption(DefaultPreemptionArgs {
            min_candidate_nodes_percentage: 10,
            min_candidate_nodes_absolute: 0
        }))
    );
    // Explicit configs keep their place; defaults for the rest follow, sorted by name.
    let order: Vec<&str> = p.plugin_config.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        order,
        [
            "NodeResourcesFit",
            "NodeResourcesBalancedAllocation",
            "DefaultPreemption",
            "DynamicResources",
            "InterPodAffinity",
            "NodeAffinity",
            "PodTopologySpread",
            "VolumeBinding"
        ]
    );
}

#[test]
fn scheduler_name_defaults_only_for_a_single_profile() {
    let one = load_str(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- plugins: {}\n",
        "t",
    )
    .unwrap();
    assert_eq!(one.config.profiles[0].scheduler_name, "default-scheduler");
    let two = load_str(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n- plugins: {}\n- schedulerName: b\n",
        "t",
    )
    .unwrap_err();
    assert_eq!(two.0[0].path, "profiles[0].schedulerName");
}

#[test]
fn to_yaml_round_trips_default_and_custom_configs() {
    let d = default_config();
    let text = to_yaml(&d);
    assert!(text.starts_with(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
    ));
    assert!(text.contains("leaseDuration: 15s"));
    assert!(text.contains("kind: NodeResourcesFitArgs"));
    let back = load_str(&text, "printed.yaml").unwrap();
    assert_eq!(back.config, d);
    assert!(back.warnings.is_empty());

    let custom = "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
parallelism: 8
leaderElection:
  leaseDuration: 1m30s
  renewDeadline: 1m
  retryPeriod: 1.5s
clientConnection:
  qps: 12.5
  kubeconfig: /etc/kubernetes/scheduler.conf
percentageOfNodesToScore: 40
profiles:
- schedulerName: default-scheduler
- schedulerName: bin-packing
  percentageOfNodesToScore: 100
  plugins:
    multiPoint:
      disabled:
      - name: NodeResourcesBalancedAllocation
    score:
      enabled:
      - name: NodeResourcesFit
        weight: 5
      disabled:
      - name: PodTopologySpread
  pluginConfig:
  - name: NodeResourcesFit
    args:
      ignoredResourceGroups: [example.com]
      scoringStrategy:
        type: RequestedToCapacityRatio
        resources: [{name: cpu, weight: 3}]
        requestedToCapacityRatio:
          shape: [{utilization: 0, score: 0}, {utilization: 100, score: 10}]
  - name: NodeAffinity
    args:
      addedAffinity:
        requiredDuringSchedulingIgnoredDuringExecution:
          nodeSelectorTerms:
          - matchExpressions:
            - {key: pool, operator: In, values: [batch]}
  - name: PodTopologySpread
    args:
      defaultingType: List
      defaultConstraints:
      - {maxSkew: 2, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: ScheduleAnyway}
";
    let first = load_str(custom, "custom.yaml").unwrap();
    let printed = to_yaml(&first.config);
    let second = load_str(&printed, "printed.yaml").unwrap_or_else(|e| panic!("{e}\n{printed}"));
    assert_eq!(second.config, first.config);
    assert_eq!(second.profiles, first.profiles);
    assert_eq!(
        first.config.leader_election.lease_duration,
        Duration::from_secs(90)
    );
    assert!(printed.contains("leaseDuration: 1m30s"));
    assert!(printed.contains("retryPeriod: 1.5s"));
}

#[test]
fn awkward_strings_survive_printing() {
    let text = "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: \"007\"
- schedulerName: \"true\"
  plugins:
    multiPoint:
      enabled: [{name: PrioritySort}, {name: DefaultBinder}]
      disabled: [{name: '*'}]
";
    let first = load_str(text, "t").unwrap();
    let printed = to_yaml(&first.config);
    let second = load_str(&printed, "printed").unwrap_or_else(|e| panic!("{e}\n{printed}"));
    assert_eq!(second.config, first.config);
    assert_eq!(second.config.profiles[0].scheduler_name, "007");
    assert_eq!(
        second.config.profiles[1].plugins.multi_point.disabled,
        ["*"]
    );
}

#[test]
fn json_configs_load_too() {
    let l = load_str(
        r#"{"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
            "profiles": [{"schedulerName": "json", "plugins": {"score": {"disabled": [{"name": "ImageLocality"}]}}}]}"#,
        "c.json",
    )
    .unwrap();
    assert_eq!(l.config.profiles[0].scheduler_name, "json");
    assert_eq!(l.profiles[0].weight("ImageLocality"), None);
    let e = load_str(
        r#"{"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
            "parallelism": "x"}"#,
        "c.json",
    )
    .unwrap_err();
    assert_eq!((e.0[0].line, e.0[0].column), (Some(2), Some(28)));
}

#[test]
fn from_flags_binds_to_the_default_profile() {
    let l = from_flags(Some("my-scheduler"), Some(7)).unwrap();
    let p = &l.config.profiles[0];
    assert_eq!(p.scheduler_name, "my-scheduler");
    assert_eq!(
        p.args("InterPodAffinity"),
        Some(&PluginArgs::InterPodAffinity(InterPodAffinityArgs {
            hard_pod_affinity_weight: 7,
            ignore_preferred_terms_of_existing_pods: false
        }))
    );
    assert_eq!(l.profiles[0].plugins_at(Score).len(), 9); // DynamicResources scores firstAvailable choices

    let none = from_flags(None, None).unwrap();
    assert_eq!(none.config, default_config());

    let err = from_flags(None, Some(101)).unwrap_err();
    assert_eq!(err.len(), 1);
    let e = &err.0[0];
    assert_eq!(e.source, FLAGS_SOURCE);
    assert_eq!(e.path, FLAG_HARD_POD_AFFINITY_SYMMETRIC_WEIGHT);
    assert_eq!(e.message, "Invalid value: 101: not in valid range [0, 100]");
    assert_eq!(e.line, None);
    assert_eq!(
        e.to_string(),
        "command-line flags: --hard-pod-affinity-symmetric-weight: Invalid value: 101: not in valid range [0, 100]\n  fix: pass --hard-pod-affinity-symmetric-weight a value from 0 to 100"
    );
    let err = from_flags(Some(""), Some(-1)).unwrap_err();
    let paths: Vec<&str> = err.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(
        paths,
        [FLAG_SCHEDULER_NAME, FLAG_HARD_POD_AFFINITY_SYMMETRIC_WEIGHT]
    );
}

#[test]
fn load_file_reports_unreadable_files() {
    let e = load_file(std::path::Path::new("/nonexistent/ferrosched.yaml")).unwrap_err();
    assert_eq!(e.0[0].source, "/nonexistent/ferrosched.yaml");
    assert!(e.0[0].message.starts_with("cannot read config file"));
}
