//! One failing input per validation rule: the message, the field path and the line.

use scheduler_core::config::{ConfigError, load_str, message as msg};

const HEAD: &str = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n";

fn errors(body: &str) -> Vec<ConfigError> {
    let text = format!("{HEAD}{body}");
    match load_str(&text, "test.yaml") {
        Ok(_) => panic!("expected errors for:\n{text}"),
        Err(e) => e.0,
    }
}

/// The single error at `path`, asserting its line and that its message contains `needle`.
#[track_caller]
fn expect(body: &str, path: &str, line: u32, needle: &str) -> ConfigError {
    let errs = errors(body);
    let e = errs
        .iter()
        .find(|e| e.path == path)
        .unwrap_or_else(|| panic!("no error at {path}; got:\n{}", dump(&errs)));
    assert!(
        e.message.contains(needle),
        "message {:?} lacks {needle:?}",
        e.message
    );
    assert_eq!(e.line, Some(line), "wrong line for {e}");
    assert!(e.column.is_some(), "no column for {e}");
    assert_eq!(e.source, "test.yaml");
    e.clone()
}

fn dump(errs: &[ConfigError]) -> String {
    errs.iter().map(|e| format!("  {e}\n")).collect()
}

#[test]
fn parallelism_must_be_positive() {
    let e = expect("parallelism: 0\n", "parallelism", 3, msg::PARALLELISM);
    assert_eq!(
        e.message,
        "Invalid value: 0: should be an integer value greater than zero"
    );
    assert_eq!(
        e.to_string().lines().next().unwrap(),
        "test.yaml:3:14: parallelism: Invalid value: 0: should be an integer value greater than zero"
    );
    assert!(e.fix.is_some());
}

#[test]
fn percentage_of_nodes_to_score_range_global_and_per_profile() {
    expect(
        "percentageOfNodesToScore: 101\n",
        "percentageOfNodesToScore",
        3,
        msg::PERCENTAGE_RANGE,
    );
    expect(
        "profiles:\n- schedulerName: a\n  percentageOfNodesToScore: -1\n",
        "profiles[0].percentageOfNodesToScore",
        5,
        "Invalid value: -1: not in valid range [0-100]",
    );
}

#[test]
fn backoff_rules() {
    expect(
        "podInitialBackoffSeconds: 0\n",
        "podInitialBackoffSeconds",
        3,
        msg::POD_INITIAL_BACKOFF,
    );
    expect(
        "podInitialBackoffSeconds: 5\npodMaxBackoffSeconds: 4\n",
        "podMaxBackoffSeconds",
        4,
        msg::POD_MAX_BACKOFF,
    );
}

#[test]
fn leader_election_rules() {
    expect(
        "leaderElection:\n  leaseDuration: 5s\n  renewDeadline: 10s\n",
        "leaderElection.leaseDuration",
        4,
        msg::LEASE_GT_RENEW,
    );
    expect(
        "leaderElection:\n  renewDeadline: 2s\n  retryPeriod: 2s\n",
        "leaderElection.renewDeadline",
        4,
        "retryPeriod*JitterFactor",
    );
    expect(
        "leaderElection:\n  resourceLock: endpoints\n",
        "leaderElection.resourceLock",
        4,
        msg::RESOURCE_LOCK_LEASES,
    );
    expect(
        "leaderElection:\n  retryPeriod: -2s\n",
        "leaderElection.retryPeriod",
        4,
        msg::GREATER_THAN_ZERO,
    );
    let e = expect(
        "leaderElection:\n  leaseDuration: 15\n",
        "leaderElection.leaseDuration",
        4,
        "missing unit",
    );
    assert_eq!(e.fix.as_deref(), Some(msg::FIX_DURATION));
    // Without leader election none of this is checked, as upstream.
    assert!(
        load_str(
            &format!("{HEAD}leaderElection:\n  leaderElect: false\n  resourceLock: endpoints\n"),
            "t"
        )
        .is_ok()
    );
}

#[test]
fn client_connection_burst() {
    expect(
        "clientConnection:\n  burst: -1\n",
        "clientConnection.burst",
        4,
        msg::BURST_NON_NEGATIVE,
    );
    let l = load_str(&format!("{HEAD}clientConnection:\n  qps: -1\n"), "t").unwrap();
    assert!(
        l.warnings
            .iter()
            .any(|w| w.message == msg::QPS_NEGATIVE_WARNING)
    );
}

#[test]
fn scheduler_names_required_and_unique() {
    expect(
        "profiles:\n- schedulerName: a\n- plugins: {}\n",
        "profiles[1].schedulerName",
        5,
        "Required value",
    );
    expect(
        "profiles:\n- schedulerName: a\n- schedulerName: b\n- schedulerName: a\n",
        "profiles[2].schedulerName",
        6,
        "Duplicate value: \"a\"",
    );
    expect(
        "profiles:\n- schedulerName: \"\"\n",
        "profiles[0].schedulerName",
        4,
        "Required value",
    );
}

#[test]
fn queue_sort_must_match_across_profiles() {
    let body = "profiles:
- schedulerName: a
- schedulerName: b
  plugins:
    queueSort:
      enabled:
      - name: PrioritySort
      disabled:
      - name: '*'
";
    let e = expect(
        body,
        "profiles[1].plugins.queueSort",
        7,
        msg::QUEUE_SORT_SAME,
    );
    assert_eq!(e.message, "must be the same for all profiles");
}

#[test]
fn unknown_plugin_with_suggestion() {
    let body = "profiles:
- schedulerName: a
  plugins:
    score:
      enabled:
      - name: NodeResourcesFitt
";
    let e = expect(
        body,
        "profiles[0].plugins.score.enabled[0].name",
        8,
        "ScorePlugin \"NodeResourcesFitt\" does not exist",
    );
    assert_eq!(e.fix.as_deref(), Some("did you mean `NodeResourcesFit`?"));
    let e = expect(
        "profiles:\n- plugins:\n    multiPoint:\n      enabled:\n      - name: Zzzzzz\n",
        "profiles[0].plugins.multiPoint.enabled[0].name",
        7,
        "plugin \"Zzzzzz\" does not exist",
    );
    assert!(e.fix.unwrap().starts_with("known plugins: SchedulingGates"));
}

#[test]
fn removed_and_unsupported_plugins_say_why() {
    let e = expect(
        "profiles:\n- plugins:\n    filter:\n      enabled:\n      - name: EBSLimits\n",
        "profiles[0].plugins.filter.enabled[0].name",
        7,
        "removed from kube-scheduler",
    );
    assert!(
        e.message
            .starts_with("plugin \"EBSLimits\" cannot be enabled")
    );
}

#[test]
fn plugin_config_for_plugins_removed_upstream() {
    expect(
        "profiles:\n- pluginConfig:\n  - name: EBSLimits\n",
        "profiles[0].pluginConfig[0]",
        5,
        "was invalid in version \"kubescheduler.config.k8s.io/v1\"",
    );
}

#[test]
fn unknown_disabled_names_only_warn() {
    let l = load_str(
        &format!("{HEAD}profiles:\n- plugins:\n    multiPoint:\n      disabled:\n      - name: EBSLimits\n      - name: NodeResourcesFitt\n"),
        "t.yaml",
    )
    .unwrap();
    assert_eq!(l.warnings.len(), 2, "{:?}", l.warnings);
    assert_eq!(
        l.warnings[0].path,
        "profiles[0].plugins.multiPoint.disabled[0]"
    );
    assert_eq!(l.warnings[0].line, Some(7));
    assert!(
        l.warnings[0]
            .message
            .contains("\"EBSLimits\" is not a known plugin")
    );
    assert_eq!(
        l.warnings[1].fix.as_deref(),
        Some("did you mean `NodeResourcesFit`?")
    );
}

#[test]
fn plugin_at_a_point_it_does_not_implement() {
    let e = expect(
        "profiles:\n- plugins:\n    score:\n      enabled:\n      - name: NodePorts\n",
        "profiles[0].plugins.score.enabled[0].name",
        7,
        "plugin \"NodePorts\" does not extend ScorePlugin plugin",
    );
    assert!(e.fix.unwrap().contains("preFilter, filter"));
}

#[test]
fn duplicate_plugin_in_one_list() {
    expect(
        "profiles:\n- plugins:\n    filter:\n      enabled:\n      - name: NodePorts\n      - name: NodePorts\n",
        "profiles[0].plugins.filter.enabled[1].name",
        8,
        "plugin \"NodePorts\" already registered as \"FilterPlugin\"",
    );
}

#[test]
fn negative_score_weight() {
    let e = expect(
        "profiles:\n- plugins:\n    score:\n      enabled:\n      - name: ImageLocality\n        weight: -2\n",
        "profiles[0].plugins.score.enabled[0].weight",
        8,
        msg::NEGATIVE_WEIGHT,
    );
    assert_eq!(e.fix.as_deref(), Some(msg::NEGATIVE_WEIGHT_FIX));
}

#[test]
fn weight_outside_score_is_ignored_with_warning() {
    let l = load_str(
        &format!("{HEAD}profiles:\n- plugins:\n    filter:\n      enabled:\n      - name: NodePorts\n        weight: 5\n      disabled:\n      - name: NodePorts\n"),
        "t",
    )
    .unwrap();
    assert!(
        l.warnings
            .iter()
            .any(|w| w.path == "profiles[0].plugins.filter.enabled[0].weight")
    );
    assert_eq!(l.profiles[0].weight("NodePorts"), None);
}

#[test]
fn duplicate_plugin_config() {
    let body = "profiles:
- pluginConfig:
  - name: InterPodAffinity
  - name: InterPodAffinity
    args:
      hardPodAffinityWeight: 3
";
    expect(
        body,
        "profiles[0].pluginConfig[1]",
        6,
        "Duplicate value: \"InterPodAffinity\"",
    );
}

#[test]
fn plugin_config_for_plugin_without_args() {
    expect(
        "profiles:\n- pluginConfig:\n  - name: PrioritySort\n    args:\n      foo: 1\n",
        "profiles[0].pluginConfig[0].args",
        6,
        "plugin PrioritySort takes no args",
    );
}

#[test]
fn plugin_config_for_a_disabled_plugin_warns() {
    let l = load_str(
        &format!("{HEAD}profiles:\n- plugins:\n    multiPoint:\n      disabled:\n      - name: InterPodAffinity\n  pluginConfig:\n  - name: InterPodAffinity\n    args:\n      hardPodAffinityWeight: 5\n"),
        "t",
    )
    .unwrap();
    let w: Vec<_> = l
        .warnings
        .iter()
        .map(|w| (w.path.as_str(), w.line))
        .collect();
    assert_eq!(w, vec![("profiles[0].pluginConfig[0].name", Some(9))]);
    assert!(l.warnings[0].message.contains("not enabled"));
}

#[test]
fn plugin_config_for_a_plugin_that_does_not_exist_is_an_error() {
    expect(
        "profiles:\n- pluginConfig:\n  - name: MyOutOfTreePlugin\n    args: {x: 1}\n",
        "profiles[0].pluginConfig[0].name",
        5,
        "pluginConfig for \"MyOutOfTreePlugin\": no plugin has this name, so the entry can never take effect",
    );
}

#[test]
fn args_kind_and_api_version_must_match_when_present() {
    let body = "profiles:
- pluginConfig:
  - name: NodeResourcesFit
    args:
      kind: InterPodAffinityArgs
      apiVersion: kubescheduler.config.k8s.io/v1beta3
";
    let errs = errors(body);
    assert_eq!(errs.len(), 2, "{}", dump(&errs));
    assert_eq!(errs[0].path, "profiles[0].pluginConfig[0].args.kind");
    assert!(errs[0].message.contains("args for plugin NodeResourcesFit were not of type NodeResourcesFitArgs, got InterPodAffinityArgs"));
    assert_eq!(errs[1].path, "profiles[0].pluginConfig[0].args.apiVersion");
    assert_eq!(errs[1].line, Some(8));
    // Matching values are fine.
    assert!(load_str(&format!("{HEAD}profiles:\n- pluginConfig:\n  - name: NodeResourcesFit\n    args:\n      kind: NodeResourcesFitArgs\n      apiVersion: kubescheduler.config.k8s.io/v1\n"), "t").is_ok());
}

#[test]
fn extenders_valid_config_loads_defaulted() {
    let text = format!(
        "{HEAD}extenders:\n- urlPrefix: https://gpu.example:8443/scheduler\n  filterVerb: filter\n  prioritizeVerb: prioritize\n  weight: 3\n  enableHTTPS: true\n  tlsConfig:\n    caData: aGVsbG8=\n  managedResources:\n  - name: example.com/gpu\n    ignoredByScheduler: true\n- urlPrefix: http://binder.example\n  bindVerb: bind\n"
    );
    let l = load_str(&text, "t").expect("valid extenders");
    assert!(l.warnings.is_empty(), "{:?}", l.warnings);
    let e = &l.config.extenders;
    assert_eq!(e.len(), 2);
    assert_eq!(e[0].weight, 3);
    // kube-scheduler's DefaultExtenderTimeout when httpTimeout is left out.
    assert_eq!(e[1].http_timeout, std::time::Duration::from_secs(5));
    assert_eq!(
        scheduler_core::config::extender_ignored_resources(e),
        vec!["example.com/gpu".to_string()]
    );
}

#[test]
fn extender_prioritize_needs_positive_weight() {
    let e = expect(
        "extenders:\n- urlPrefix: http://127.0.0.1:8888\n  prioritizeVerb: prioritize\n  weight: -2\n",
        "extenders[0].weight",
        6,
        msg::EXTENDER_WEIGHT,
    );
    assert!(e.message.contains("Invalid value: -2"));
    assert_eq!(e.fix.as_deref(), Some(msg::EXTENDER_WEIGHT_FIX));
    // Left out, weight is 0, which upstream refuses as well.
    let errs =
        errors("extenders:\n- urlPrefix: http://127.0.0.1:8888\n  prioritizeVerb: prioritize\n");
    assert!(
        errs.iter().any(|e| e.path == "extenders[0].weight"),
        "{}",
        dump(&errs)
    );
    // Without prioritizeVerb the weight does not matter.
    assert!(
        load_str(
            &format!("{HEAD}extenders:\n- urlPrefix: http://x\n  filterVerb: f\n"),
            "t"
        )
        .is_ok()
    );
}

#[test]
fn extender_url_required_with_a_verb_and_http_scheme() {
    let e = expect(
        "extenders:\n- filterVerb: filter\n",
        "extenders[0].urlPrefix",
        4,
        msg::EXTENDER_URL_REQUIRED,
    );
    assert_eq!(e.fix.as_deref(), Some(msg::EXTENDER_URL_FIX));
    expect(
        "extenders:\n- urlPrefix: gpu.example:80\n  filterVerb: filter\n",
        "extenders[0].urlPrefix",
        4,
        msg::EXTENDER_URL_SCHEME,
    );
    // An extender with only managed resources (to hide them from NodeResourcesFit) needs no URL.
    assert!(load_str(&format!("{HEAD}extenders:\n- managedResources:\n  - name: example.com/x\n    ignoredByScheduler: true\n"), "t").is_ok());
}

#[test]
fn extender_at_most_one_binder() {
    let e = expect(
        "extenders:\n- urlPrefix: http://a\n  bindVerb: bind\n- urlPrefix: http://b\n  bindVerb: bind\n",
        "extenders",
        3,
        msg::EXTENDER_BINDERS,
    );
    assert!(e.message.contains("found 2 extenders implementing bind"));
}

#[test]
fn extender_managed_resources_names() {
    expect(
        "extenders:\n- urlPrefix: http://a\n  managedResources:\n  - name: example.com/gpu\n- urlPrefix: http://b\n  managedResources:\n  - name: example.com/gpu\n",
        "extenders[1].managedResources[0].name",
        9,
        msg::EXTENDER_RESOURCE_DUPLICATE,
    );
    // Native resources are not extended resources.
    expect(
        "extenders:\n- urlPrefix: http://a\n  managedResources:\n  - name: cpu\n",
        "extenders[0].managedResources[0].name",
        6,
        msg::EXTENDER_RESOURCE_INVALID,
    );
    expect(
        "extenders:\n- urlPrefix: http://a\n  managedResources:\n  - name: kubernetes.io/foo\n",
        "extenders[0].managedResources[0].name",
        6,
        msg::EXTENDER_RESOURCE_INVALID,
    );
    expect(
        "extenders:\n- urlPrefix: http://a\n  managedResources:\n  - name: example.com/a/b\n",
        "extenders[0].managedResources[0].name",
        6,
        "qualified name",
    );
}

#[test]
fn extender_tls_config() {
    expect(
        "extenders:\n- urlPrefix: https://a\n  enableHTTPS: true\n  tlsConfig:\n    caData: '%%%'\n",
        "extenders[0].tlsConfig.caData",
        7,
        msg::EXTENDER_BASE64,
    );
    let e = expect(
        "extenders:\n- urlPrefix: https://a\n  enableHTTPS: true\n  tlsConfig:\n    certFile: /c.pem\n",
        "extenders[0].tlsConfig",
        6,
        msg::EXTENDER_CERT_KEY,
    );
    assert_eq!(e.fix.as_deref(), Some(msg::EXTENDER_CERT_KEY_FIX));
    // No CA: kube-scheduler does not verify the server; ferrosched does the same and warns.
    let l = load_str(
        &format!("{HEAD}extenders:\n- urlPrefix: https://a\n  enableHTTPS: true\n"),
        "t",
    )
    .unwrap();
    assert_eq!(l.warnings.len(), 1);
    assert!(l.warnings[0].message.contains("not verified"));
    let l = load_str(
        &format!("{HEAD}extenders:\n- urlPrefix: http://a\n  enableHTTPS: true\n"),
        "t",
    )
    .unwrap();
    assert!(l.warnings[0].message.contains("not used"));
}

// --- plugin args ----------------------------------------------------------------------------

fn args(plugin: &str, args: &str) -> String {
    let indented: String = args.lines().map(|l| format!("      {l}\n")).collect();
    format!("profiles:\n- pluginConfig:\n  - name: {plugin}\n    args:\n{indented}")
}
// Line of the first args field in `args()` documents.
const ARGS_LINE: u32 = 7;
const ARGS: &str = "profiles[0].pluginConfig[0].args";

#[test]
fn inter_pod_affinity_weight_range() {
    expect(
        &args("InterPodAffinity", "hardPodAffinityWeight: 101"),
        &format!("{ARGS}.hardPodAffinityWeight"),
        ARGS_LINE,
        "Invalid value: 101: not in valid range [0, 100]",
    );
}

#[test]
fn default_preemption_rules() {
    expect(
        &args("DefaultPreemption", "minCandidateNodesPercentage: 101"),
        &format!("{ARGS}.minCandidateNodesPercentage"),
        ARGS_LINE,
        "not in valid range [0, 100]",
    );
    expect(
        &args("DefaultPreemption", "minCandidateNodesAbsolute: -1"),
        &format!("{ARGS}.minCandidateNodesAbsolute"),
        ARGS_LINE,
        "not in valid range [0, inf)",
    );
    let errs = errors(&args(
        "DefaultPreemption",
        "minCandidateNodesPercentage: 0\nminCandidateNodesAbsolute: 0",
    ));
    assert_eq!(errs.len(), 2, "{}", dump(&errs));
    assert!(
        errs[0]
            .message
            .contains("cannot be zero at the same time as minCandidateNodesAbsolute")
    );
    assert_eq!(errs[1].line, Some(ARGS_LINE + 1));
}

#[test]
fn fit_scoring_strategy_rules() {
    expect(
        &args("NodeResourcesFit", "scoringStrategy:\n  type: Invalid"),
        &format!("{ARGS}.scoringStrategy.type"),
        ARGS_LINE + 1,
        "Unsupported value: \"Invalid\": supported values: \"LeastAllocated\", \"MostAllocated\", \"RequestedToCapacityRatio\"",
    );
    expect(
        &args(
            "NodeResourcesFit",
            "scoringStrategy:\n  resources:\n  - name: cpu",
        ),
        &format!("{ARGS}.scoringStrategy.type"),
        ARGS_LINE,
        "Unsupported value: \"\"",
    );
    expect(
        &args(
            "NodeResourcesFit",
            "scoringStrategy:\n  type: MostAllocated\n  resources:\n  - name: cpu\n    weight: 101",
        ),
        &format!("{ARGS}.scoringStrategy.resources[0].weight"),
        ARGS_LINE + 4,
        "resource weight of cpu not in valid range (0, 100]",
    );
    expect(
        &args(
            "NodeResourcesFit",
            "scoringStrategy:\n  type: RequestedToCapacityRatio",
        ),
        &format!("{ARGS}.scoringStrategy.requestedToCapacityRatio"),
        ARGS_LINE,
        "must be specified when type is RequestedToCapacityRatio",
    );
    expect(
        &args(
            "NodeResourcesFit",
            "scoringStrategy:\n  type: LeastAllocated\n  requestedToCapacityRatio:\n    shape: []",
        ),
        &format!("{ARGS}.scoringStrategy.requestedToCapacityRatio"),
        ARGS_LINE + 2,
        "Forbidden: must be nil when type is not RequestedToCapacityRatio",
    );
}

#[test]
fn fit_shape_rules() {
    let shape = |points: &str| {
        args(
            "NodeResourcesFit",
            &format!(
                "scoringStrategy:\n  type: RequestedToCapacityRatio\n  requestedToCapacityRatio:\n    shape:\n{points}"
            ),
        )
    };
    let sp = format!("{ARGS}.scoringStrategy.requestedToCapacityRatio.shape");
    expect(
        &shape("    - {utilization: 10, score: 3}\n    - {utilization: 10, score: 3}"),
        &format!("{sp}[1].utilization"),
        ARGS_LINE + 5,
        "values must be sorted in increasing order",
    );
    expect(
        &shape("    - {utilization: 101, score: 3}"),
        &format!("{sp}[0].utilization"),
        ARGS_LINE + 4,
        "not in valid range [0, 100]",
    );
    expect(
        &shape("    - {utilization: 10, score: 11}"),
        &format!("{sp}[0].score"),
        ARGS_LINE + 4,
        "not in valid range [0, 10]",
    );
    expect(
        &shape("      []"),
        &sp,
        ARGS_LINE + 3,
        "at least one point must be specified",
    );
}

#[test]
fn fit_ignored_resources_formats() {
    expect(
        &args("NodeResourcesFit", "ignoredResources:\n- example.com/"),
        &format!("{ARGS}.ignoredResources[0]"),
        ARGS_LINE + 1,
        "name part must be non-empty",
    );
    let errs = errors(&args(
        "NodeResourcesFit",
        "ignoredResourceGroups:\n- example.com/aa",
    ));
    assert_eq!(errs[0].path, format!("{ARGS}.ignoredResourceGroups[0]"));
    assert!(
        errs[0]
            .message
            .contains("resource group name can't contain '/'")
    );
}

#[test]
fn balanced_allocation_rules() {
    expect(
        &args(
            "NodeResourcesBalancedAllocation",
            "resources:\n- name: cpu\n  weight: 2",
        ),
        &format!("{ARGS}.resources[0].weight"),
        ARGS_LINE + 2,
        "Invalid value: 2: must be 1",
    );
    expect(
        &args(
            "NodeResourcesBalancedAllocation",
            "resources:\n- name: cpu\n- name: cpu",
        ),
        &format!("{ARGS}.resources[1].name"),
        ARGS_LINE + 2,
        "Duplicate value: \"cpu\"",
    );
}

#[test]
fn pod_topology_spread_rules() {
    let c = |extra: &str| {
        args(
            "PodTopologySpread",
            &format!("defaultingType: List\ndefaultConstraints:\n{extra}"),
        )
    };
    let cp = format!("{ARGS}.defaultConstraints[0]");
    expect(
        &c("- maxSkew: 0\n  topologyKey: zone\n  whenUnsatisfiable: DoNotSchedule"),
        &format!("{cp}.maxSkew"),
        ARGS_LINE + 2,
        "not in valid range (0, inf)",
    );
    expect(
        &c("- maxSkew: 1\n  whenUnsatisfiable: DoNotSchedule"),
        &format!("{cp}.topologyKey"),
        ARGS_LINE + 2,
        "Required value: can not be empty",
    );
    expect(
        &c("- maxSkew: 1\n  topologyKey: zone\n  whenUnsatisfiable: Sometimes"),
        &format!("{cp}.whenUnsatisfiable"),
        ARGS_LINE + 4,
        "Unsupported value: \"Sometimes\"",
    );
    expect(
        &c(
            "- maxSkew: 1\n  topologyKey: zone\n  whenUnsatisfiable: ScheduleAnyway\n  labelSelector: {matchLabels: {a: b}}",
        ),
        &format!("{cp}.labelSelector"),
        ARGS_LINE + 5,
        "Forbidden: constraint must not define a selector",
    );
    expect(
        &c(
            "- {maxSkew: 1, topologyKey: zone, whenUnsatisfiable: ScheduleAnyway}\n- {maxSkew: 2, topologyKey: zone, whenUnsatisfiable: ScheduleAnyway}",
        ),
        &format!("{ARGS}.defaultConstraints[1]"),
        ARGS_LINE + 3,
        "Duplicate value: \"{zone, ScheduleAnyway}\"",
    );
    expect(
        &args(
            "PodTopologySpread",
            "defaultConstraints:\n- {maxSkew: 1, topologyKey: zone, whenUnsatisfiable: ScheduleAnyway}",
        ),
        &format!("{ARGS}.defaultingType"),
        // Not written: points at `args:`, the mapping it is missing from.
        ARGS_LINE - 1,
        "when .defaultConstraints are not empty",
    );
    expect(
        &args("PodTopologySpread", "defaultingType: Sometimes"),
        &format!("{ARGS}.defaultingType"),
        ARGS_LINE,
        "Unsupported value: \"Sometimes\": supported values: \"List\", \"System\"",
    );
}

#[test]
fn volume_binding_rules() {
    expect(
        &args("VolumeBinding", "bindTimeoutSeconds: -10"),
        &format!("{ARGS}.bindTimeoutSeconds"),
        ARGS_LINE,
        "invalid BindTimeoutSeconds, should not be a negative value",
    );
    // Zero means "do not wait" and is valid.
    assert!(
        load_str(
            &format!("{HEAD}{}", args("VolumeBinding", "bindTimeoutSeconds: 0")),
            "t"
        )
        .is_ok()
    );
}

/// `shape` (StorageCapacityScoring, default on since 1.37) follows the shape rules of
/// RequestedToCapacityRatio; an empty list is defaulted before validation, as upstream.
#[test]
fn volume_binding_shape_rules() {
    let sp = format!("{ARGS}.shape");
    let e = expect(
        &args(
            "VolumeBinding",
            "shape:\n- {utilization: 60, score: 3}\n- {utilization: 40, score: 5}",
        ),
        &format!("{sp}[1].utilization"),
        ARGS_LINE + 2,
        "Invalid value: 40: values must be sorted in increasing order",
    );
    assert!(e.fix.is_some(), "{e}");
    let errs = errors(&args(
        "VolumeBinding",
        "shape:\n- {utilization: -1, score: 11}",
    ));
    let paths: Vec<&str> = errs.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(
        paths,
        [format!("{sp}[0].utilization"), format!("{sp}[0].score")],
        "{}",
        dump(&errs)
    );
    assert!(errs[0].message.contains("not in valid range [0, 100]"));
    assert!(errs[1].message.contains("not in valid range [0, 10]"));
    for ok in [
        "shape: []",
        "shape:\n- {utilization: 0, score: 0}\n- {utilization: 100, score: 10}",
    ] {
        let text = format!("{HEAD}{}", args("VolumeBinding", ok));
        let loaded = load_str(&text, "t").unwrap_or_else(|e| panic!("{ok}: {e}"));
        assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    }
}

/// DynamicResourcesArgs (upstream's table with every DRA gate on, as in 1.37).
#[test]
fn dynamic_resources_rules() {
    expect(
        &args("DynamicResources", "filterTimeout: -1s"),
        &format!("{ARGS}.filterTimeout"),
        ARGS_LINE,
        "Invalid value: \"-1s\": must be zero or positive",
    );
    expect(
        &args("DynamicResources", "bindingTimeout: 500ms"),
        &format!("{ARGS}.bindingTimeout"),
        ARGS_LINE,
        "Invalid value: \"500ms\": must be at least 1 second",
    );
    expect(
        &args("DynamicResources", "bindingTimeout: -5s"),
        &format!("{ARGS}.bindingTimeout"),
        ARGS_LINE,
        "must be at least 1 second",
    );
    expect(
        &args("DynamicResources", "filterTimeout: 10"),
        &format!("{ARGS}.filterTimeout"),
        ARGS_LINE,
        "missing unit in duration 10",
    );
    expect(
        &args("DynamicResources", "filterTimout: 1s"),
        &format!("{ARGS}.filterTimout"),
        ARGS_LINE,
        "unknown field",
    );
    for ok in ["filterTimeout: 0s", "filterTimeout: 2s\nbindingTimeout: 1s"] {
        let text = format!("{HEAD}{}", args("DynamicResources", ok));
        load_str(&text, "t").unwrap_or_else(|e| panic!("{ok}: {e}"));
    }
}

/// The PodGroup placement fields of upstream's v1 (topology-aware workload scheduling):
/// `percentageOfPlacementsToScore` is range-checked like the node percentage, the placement
/// points take plugins and weights like `score`, and the points ferrosched runs fixed may only
/// be disabled.
#[test]
fn workload_scheduling_fields() {
    expect(
        "percentageOfPlacementsToScore: 130\n",
        "percentageOfPlacementsToScore",
        3,
        msg::PERCENTAGE_RANGE,
    );
    expect(
        "profiles:\n- percentageOfPlacementsToScore: -1\n",
        "profiles[0].percentageOfPlacementsToScore",
        4,
        msg::PERCENTAGE_RANGE,
    );
    // A plugin that is not a placement scorer, at placementScore.
    expect(
        "profiles:\n- plugins:\n    placementScore:\n      enabled:\n      - name: ImageLocality\n",
        "profiles[0].plugins.placementScore.enabled[0].name",
        7,
        "does not extend PlacementScorePlugin",
    );
    expect(
        "profiles:\n- plugins:\n    placementScore:\n      enabled:\n      - name: PodGroupPodsCount\n        weight: -2\n",
        "profiles[0].plugins.placementScore.enabled[0].weight",
        8,
        msg::NEGATIVE_WEIGHT,
    );
    expect(
        "profiles:\n- plugins:\n    placementFeasible:\n      enabled:\n      - name: GangScheduling\n",
        "profiles[0].plugins.placementFeasible.enabled",
        6,
        "plugins.placementFeasible is not configurable in ferrosched",
    );
    // Accepted: a percentage, placement scorers reweighted, disabling what runs fixed.
    let ok = "percentageOfPlacementsToScore: 30\nprofiles:\n- percentageOfPlacementsToScore: 0\n  plugins:\n    placementScore:\n      enabled:\n      - name: PodGroupPodsCount\n        weight: 5\n      disabled:\n      - name: NodeResourcesFit\n    podGroupPostFilter:\n      disabled:\n      - name: '*'\n";
    let loaded = load_str(&format!("{HEAD}{ok}"), "t").unwrap_or_else(|e| panic!("{e}"));
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    let p = &loaded.profiles[0];
    assert_eq!(
        p.placement_score_weights,
        vec![("PodGroupPodsCount".to_string(), 5)]
    );
    // 0 in the profile is "adaptive", not "inherit": the profile's own value wins.
    assert_eq!(p.percentage_of_placements_to_score, Some(0));
    let inherit = "percentageOfPlacementsToScore: 30\n";
    let loaded = load_str(&format!("{HEAD}{inherit}"), "t").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        loaded.profiles[0].percentage_of_placements_to_score,
        Some(30)
    );
}

#[test]
fn node_affinity_rules() {
    let req = |expr: &str| {
        args(
            "NodeAffinity",
            &format!(
                "addedAffinity:\n  requiredDuringSchedulingIgnoredDuringExecution:\n    nodeSelectorTerms:\n    - matchExpressions:\n      - {expr}"
            ),
        )
    };
    let rp = format!(
        "{ARGS}.addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0]"
    );
    let line = ARGS_LINE + 4;
    expect(
        &req("{key: a, operator: Near, values: [x]}"),
        &format!("{rp}.operator"),
        line,
        "Unsupported value: \"Near\"",
    );
    expect(
        &req("{key: a, operator: Gt, values: [x]}"),
        &format!("{rp}.values[0]"),
        line,
        "for 'Gt', 'Lt' operators, the value must be an integer",
    );
    expect(
        &req("{key: a, operator: Lt, values: ['1', '2']}"),
        &format!("{rp}.values"),
        line,
        "exactly one value is required",
    );
    expect(
        &req("{key: a, operator: In, values: []}"),
        &format!("{rp}.values"),
        line,
        "values set can't be empty",
    );
    expect(
        &req("{key: a, operator: Exists, values: [x]}"),
        &format!("{rp}.values"),
        line,
        "values set must be empty for exists and does not exist",
    );
    expect(
        &req("{key: invalid/label/key, operator: Exists}"),
        &format!("{rp}.key"),
        line,
        "a qualified name must consist of",
    );
    let fields = args(
        "NodeAffinity",
        "addedAffinity:\n  preferredDuringSchedulingIgnoredDuringExecution:\n  - weight: 1\n    preference:\n      matchFields:\n      - {key: metadata.name, operator: In, values: [node-1, node-2]}\n      - {key: metadata.uid, operator: Exists}",
    );
    let fp = format!(
        "{ARGS}.addedAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference.matchFields"
    );
    expect(
        &fields,
        &format!("{fp}[0].values"),
        ARGS_LINE + 5,
        "must have one element",
    );
    expect(
        &fields,
        &format!("{fp}[1].operator"),
        ARGS_LINE + 6,
        "Unsupported value: \"Exists\": supported values: \"In\", \"NotIn\"",
    );
    expect(
        &fields,
        &format!("{fp}[1].key"),
        ARGS_LINE + 6,
        "supported values: \"metadata.name\"",
    );
}

// --- decoding -------------------------------------------------------------------------------

#[test]
fn unknown_field_suggests_closest() {
    let e = expect(
        "profiles:\n- schedulerNmae: fast\n",
        "profiles[0].schedulerNmae",
        4,
        "unknown field \"schedulerNmae\"",
    );
    assert_eq!(e.column, Some(3));
    assert_eq!(e.fix.as_deref(), Some("did you mean `schedulerName`?"));
    let e = expect(
        "leaderElection:\n  zzz: 1\n",
        "leaderElection.zzz",
        4,
        "unknown field",
    );
    assert_eq!(
        e.fix.as_deref(),
        Some(
            "valid fields here are: leaderElect, leaseDuration, renewDeadline, retryPeriod, resourceLock, resourceName, resourceNamespace"
        )
    );
}

#[test]
fn unknown_fields_in_embedded_kubernetes_types() {
    let body = args(
        "NodeAffinity",
        "addedAffinity:\n  requiredDuringSchedulingIgnoredDuringExecution:\n    nodeSelectorTerm: []",
    );
    let e = expect(
        &body,
        &format!(
            "{ARGS}.addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerm"
        ),
        ARGS_LINE + 2,
        "unknown field",
    );
    assert_eq!(e.fix.as_deref(), Some("did you mean `nodeSelectorTerms`?"));
}

#[test]
fn wrong_types_say_what_was_expected() {
    let e = expect(
        "parallelism: ten\n",
        "parallelism",
        3,
        "expected an integer, got string \"ten\"",
    );
    assert!(e.fix.is_none());
    let e = expect(
        "parallelism: \"16\"\n",
        "parallelism",
        3,
        "expected an integer",
    );
    assert_eq!(e.fix.as_deref(), Some("remove the quotes: 16"));
    expect(
        "enableProfiling: maybe\n",
        "enableProfiling",
        3,
        "expected a boolean",
    );
    expect(
        "profiles: {schedulerName: a}\n",
        "profiles",
        3,
        "expected a list, got a mapping",
    );
    expect(
        "parallelism: 99999999999\n",
        "parallelism",
        3,
        "out of range for int32",
    );
    let e = expect(
        "profiles:\n- schedulerName: 7\n",
        "profiles[0].schedulerName",
        4,
        "expected a string, got integer 7",
    );
    assert_eq!(e.fix.as_deref(), Some("quote it: \"7\""));
    expect(
        "profiles:\n- plugins:\n    filter:\n      disabled:\n      - NodePorts\n",
        "profiles[0].plugins.filter.disabled[0]",
        7,
        "expected a mapping with `name`",
    );
}

#[test]
fn plugin_entry_without_name_is_reported_once() {
    let errs = errors("profiles:\n- plugins:\n    score:\n      enabled:\n      - weight: 3\n");
    assert_eq!(errs.len(), 1, "{}", dump(&errs));
    assert_eq!(errs[0].path, "profiles[0].plugins.score.enabled[0].name");
    assert_eq!(errs[0].message, "Required value");
    assert_eq!(errs[0].line, Some(7));
}

#[test]
fn duplicate_keys_are_reported() {
    let e = expect(
        "profiles:\n- schedulerName: a\n  schedulerName: b\n",
        "profiles[0].schedulerName",
        5,
        "field \"schedulerName\" is set twice",
    );
    assert_eq!(e.column, Some(3));
}

#[test]
fn api_version_and_kind() {
    let load = |t: &str| load_str(t, "t.yaml").unwrap_err().0;
    let e = load("kind: KubeSchedulerConfiguration\n");
    assert_eq!(e[0].path, "apiVersion");
    assert!(e[0].message.starts_with("Required value"));
    assert!(
        e[0].fix
            .as_deref()
            .unwrap()
            .contains("apiVersion: kubescheduler.config.k8s.io/v1")
    );
    for v in [
        "kubescheduler.config.k8s.io/v1beta3",
        "kubescheduler.config.k8s.io/v1beta2",
        "example.com/v1",
    ] {
        let e = load(&format!(
            "apiVersion: {v}\nkind: KubeSchedulerConfiguration\n"
        ));
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].path, "apiVersion");
        assert_eq!(e[0].line, Some(1));
        assert!(
            e[0].message
                .contains("supported: \"kubescheduler.config.k8s.io/v1\""),
            "{}",
            e[0]
        );
    }
    let e = load("apiVersion: kubescheduler.config.k8s.io/v1\nkind: Policy\n");
    assert_eq!(e[0].path, "kind");
    assert_eq!(e[0].line, Some(2));
    assert!(e[0].message.contains("\"KubeSchedulerConfiguration\""));
    let e = load("apiVersion: kubescheduler.config.k8s.io/v1\n");
    assert_eq!(e[0].path, "kind");
    let e = load("");
    assert_eq!(e[0].path, "apiVersion");
    let e = load("- a\n- b\n");
    assert_eq!(e[0].message, msg::NOT_A_MAPPING);
}

#[test]
fn legacy_fields_in_v1_point_to_profiles() {
    let e = expect("schedulerName: x\n", "schedulerName", 3, "unknown field");
    assert!(e.fix.unwrap().contains("profiles[].schedulerName"));
}

#[test]
fn yaml_syntax_error_has_line_and_column() {
    let e = load_str(&format!("{HEAD}profiles:\n- schedulerName: [a\n"), "t.yaml").unwrap_err();
    assert_eq!(e.0.len(), 1);
    assert!(e.0[0].message.starts_with(msg::YAML_SYNTAX));
    assert!(e.0[0].line.is_some() && e.0[0].column.is_some());
}

#[test]
fn all_problems_are_reported_at_once_in_document_order() {
    let body = "parallelism: 0
profiles:
- schedulerNmae: a
  plugins:
    score:
      enabled:
      - name: ImageLocality
        weight: -1
- schedulerName: b
  pluginConfig:
  - name: InterPodAffinity
    args:
      hardPodAffinityWeight: 300
podMaxBackoffSeconds: 0
";
    let errs = errors(body);
    let got: Vec<(&str, Option<u32>)> = errs.iter().map(|e| (e.path.as_str(), e.line)).collect();
    assert_eq!(
        got,
        vec![
            ("parallelism", Some(3)),
            ("profiles[0].schedulerNmae", Some(5)),
            ("profiles[0].schedulerName", Some(5)),
            ("profiles[0].plugins.score.enabled[0].weight", Some(10)),
            (
                "profiles[1].pluginConfig[0].args.hardPodAffinityWeight",
                Some(15)
            ),
            ("podMaxBackoffSeconds", Some(16)),
        ],
        "{}",
        dump(&errs)
    );
    let all = scheduler_core::config::ConfigErrors(errs).to_string();
    assert!(
        all.starts_with(
            "6 errors in scheduler configuration test.yaml:\n 1. test.yaml:3:14: parallelism:"
        ),
        "{all}"
    );
}
