//! scheduler-plugins' Coscheduling configs load unchanged.

use scheduler_core::config::{CoschedulingArgs, PluginArgs, load_str};
use scheduler_core::framework::ExtensionPoint;

const MULTI_POINT: &str = include_str!("../../../config/coscheduling.yaml");

/// The other form scheduler-plugins documents: queueSort replaced explicitly, and the
/// plugin named at each point it implements there.
const PER_POINT: &str = "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: false
profiles:
- schedulerName: default-scheduler
  plugins:
    queueSort:
      enabled:
      - name: Coscheduling
      disabled:
      - name: \"*\"
    preFilter:
      enabled:
      - name: Coscheduling
    postFilter:
      enabled:
      - name: Coscheduling
    permit:
      enabled:
      - name: Coscheduling
    reserve:
      enabled:
      - name: Coscheduling
  pluginConfig:
  - name: Coscheduling
    args:
      permitWaitingTimeSeconds: 10
";

#[test]
fn both_documented_forms_load_with_coscheduling_as_the_queue_sort() {
    for (name, text) in [("multiPoint", MULTI_POINT), ("per point", PER_POINT)] {
        let loaded = load_str(text, "cosched.yaml").unwrap_or_else(|e| panic!("{name}: {e}"));
        let p = &loaded.profiles[0];
        assert_eq!(
            p.plugins_at(ExtensionPoint::QueueSort),
            ["Coscheduling".to_string()],
            "{name}"
        );
        // Either way a labelled pod is gated: by Coscheduling where multiPoint enables it,
        // by the default GangScheduling where the config names only the older points.
        let pre_enqueue = p.plugins_at(ExtensionPoint::PreEnqueue);
        assert!(
            pre_enqueue.contains(&"GangScheduling".to_string()),
            "{name}: {pre_enqueue:?}"
        );
        assert_eq!(
            pre_enqueue.contains(&"Coscheduling".to_string()),
            name == "multiPoint",
            "{name}: {pre_enqueue:?}"
        );
        assert_eq!(
            p.plugin_args["Coscheduling"],
            Some(PluginArgs::Coscheduling(CoschedulingArgs {
                permit_waiting_time_seconds: 10,
                pod_group_backoff_seconds: 0,
                pod_group_reject_percentage: 10,
            })),
            "{name}"
        );
    }
}

#[test]
fn args_are_defaulted_and_checked() {
    let text = "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- plugins:
    multiPoint:
      enabled: [{name: Coscheduling}]
      disabled: [{name: PrioritySort}]
";
    let loaded = load_str(text, "c.yaml").unwrap();
    assert_eq!(
        loaded.profiles[0].plugin_args["Coscheduling"],
        Some(PluginArgs::Coscheduling(CoschedulingArgs {
            permit_waiting_time_seconds: 60,
            pod_group_backoff_seconds: 0,
            pod_group_reject_percentage: 10,
        }))
    );
    let bad = format!(
        "{text}  pluginConfig:\n  - name: Coscheduling\n    args: {{podGroupBackoffSeconds: -1}}\n"
    );
    let e = load_str(&bad, "c.yaml").unwrap_err();
    assert_eq!(e.len(), 1, "{e}");
    assert_eq!(
        e.0[0].path,
        "profiles[0].pluginConfig[0].args.podGroupBackoffSeconds"
    );
    assert!(
        e.0[0]
            .message
            .contains("must be greater than or equal to 0"),
        "{e}"
    );
    // scheduler-plugins' third arg: a percentage of minMember.
    let pct = format!(
        "{text}  pluginConfig:\n  - name: Coscheduling\n    args: {{podGroupRejectPercentage: 101, permitWaitingTimeSeconds: -5}}\n"
    );
    let e = load_str(&pct, "c.yaml").unwrap_err();
    let paths: Vec<&str> = e.0.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "profiles[0].pluginConfig[0].args.podGroupRejectPercentage",
            "profiles[0].pluginConfig[0].args.permitWaitingTimeSeconds"
        ],
        "{e}"
    );
    assert!(e.0[0].message.contains("must be between 0 and 100"), "{e}");
    let ok = pct.replace(
        "101, permitWaitingTimeSeconds: -5",
        "0, permitWaitingTimeSeconds: 0",
    );
    let loaded = load_str(&ok, "c.yaml").unwrap();
    assert_eq!(
        loaded.profiles[0].plugin_args["Coscheduling"],
        Some(PluginArgs::Coscheduling(CoschedulingArgs {
            permit_waiting_time_seconds: 0,
            pod_group_backoff_seconds: 0,
            pod_group_reject_percentage: 0,
        }))
    );
    // Two queue sorts are refused as upstream refuses them.
    let both = text.replace("      disabled: [{name: PrioritySort}]\n", "");
    assert!(load_str(&both, "c.yaml").is_err());
}
