//! kube-scheduler's flags on `ferrosched run`: how clap parses them and how they combine
//! with the config (upstream `ApplyLeaderElectionTo` / `ApplyDeprecated`).

use std::process::Command;
use std::time::Duration;

use clap::Parser;
use ferrosched::flags::{KubeSchedulerFlags, verbosity_filter};
use ferrosched::logging::LogFormat;
use scheduler_core::config::{self, KubeSchedulerConfiguration};

const BIN: &str = env!("CARGO_BIN_EXE_ferrosched");

#[derive(Parser, Debug)]
struct T {
    #[command(flatten)]
    flags: KubeSchedulerFlags,
}

fn parse(args: &[&str]) -> KubeSchedulerFlags {
    T::try_parse_from(std::iter::once("t").chain(args.iter().copied()))
        .unwrap_or_else(|e| panic!("{args:?}: {e}"))
        .flags
}

fn parse_err(args: &[&str]) -> String {
    T::try_parse_from(std::iter::once("t").chain(args.iter().copied()))
        .expect_err("must be rejected")
        .to_string()
}

const FILE: &str = "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection: {qps: 77, burst: 88}
leaderElection:
  leaderElect: true
  leaseDuration: 30s
  renewDeadline: 20s
  retryPeriod: 4s
  resourceName: from-config
  resourceNamespace: config-ns
";

fn from_file() -> KubeSchedulerConfiguration {
    config::load_str(FILE, "c.yaml").unwrap().config
}

#[test]
fn go_style_bool_duration_and_verbosity_flags_parse() {
    let f = parse(&[
        "--leader-elect",
        "--leader-elect-lease-duration=1m30s",
        "--leader-elect-renew-deadline",
        "45s",
        "--leader-elect-retry-period=500ms",
        "--leader-elect-resource-lock=leases",
        "--leader-elect-resource-name=ferro",
        "--leader-elect-resource-namespace=sched",
        "--kube-api-qps=50.5",
        "--kube-api-burst=100",
        "--v=4",
    ]);
    assert_eq!(f.leader_elect, Some(true));
    assert_eq!(f.leader_elect_lease_duration, Some(Duration::from_secs(90)));
    assert_eq!(f.leader_elect_renew_deadline, Some(Duration::from_secs(45)));
    assert_eq!(
        f.leader_elect_retry_period,
        Some(Duration::from_millis(500))
    );
    assert_eq!(f.leader_elect_resource_lock.as_deref(), Some("leases"));
    assert_eq!(f.leader_elect_resource_name.as_deref(), Some("ferro"));
    assert_eq!(f.leader_elect_resource_namespace.as_deref(), Some("sched"));
    assert_eq!(f.kube_api_qps, Some(50.5));
    assert_eq!(f.kube_api_burst, Some(100));
    assert_eq!(f.verbosity, Some(4));

    assert_eq!(parse(&["--leader-elect=false"]).leader_elect, Some(false));
    assert_eq!(parse(&["--leader-elect=true"]).leader_elect, Some(true));
    // Nothing given: nothing set but upstream's defaults (always-allowed paths, the front
    // proxy's header names, lookup failures tolerated).
    assert_eq!(
        parse(&[]),
        KubeSchedulerFlags {
            authorization_always_allow_paths: vec![
                "/healthz".into(),
                "/readyz".into(),
                "/livez".into()
            ],
            requestheader_username_headers: vec!["x-remote-user".into()],
            requestheader_group_headers: vec!["x-remote-group".into()],
            requestheader_extra_headers_prefix: vec!["x-remote-extra-".into()],
            authentication_tolerate_lookup_failure: true,
            ..KubeSchedulerFlags::default()
        }
    );
    let f = parse(&[
        "--authentication-tolerate-lookup-failure=false",
        "--requestheader-allowed-names=front-proxy-client,aggregator",
        "--requestheader-username-headers=X-Remote-User,X-User",
        "--requestheader-uid-headers=X-Remote-Uid",
        "--tls-sni-cert-key=a.crt,a.key",
        "--tls-sni-cert-key=b.crt,b.key:b.example",
        "--tls-cipher-suites=TLS_AES_128_GCM_SHA256,TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
    ]);
    assert!(!f.authentication_tolerate_lookup_failure);
    assert_eq!(
        f.requestheader_allowed_names,
        ["front-proxy-client", "aggregator"]
    );
    assert_eq!(
        f.requestheader_username_headers,
        ["X-Remote-User", "X-User"]
    );
    assert_eq!(f.requestheader_uid_headers, ["X-Remote-Uid"]);
    assert_eq!(f.tls_sni_cert_key, ["a.crt,a.key", "b.crt,b.key:b.example"]);
    assert_eq!(f.tls_cipher_suites.len(), 2);
    // klog spellings of the verbosity.
    for args in [&["-v=3"][..], &["-v", "3"], &["--v", "3"], &["-v3"]] {
        assert_eq!(parse(args).verbosity, Some(3), "{args:?}");
    }
}

/// Logging and profiling flags of hardened manifests: accepted, the format chosen, the
/// rest validated.
#[test]
fn logging_and_profiling_flags_parse_as_kube_schedulers() {
    assert_eq!(parse(&[]).logging_format, LogFormat::Text);
    assert_eq!(
        parse(&["--logging-format=json"]).logging_format,
        LogFormat::Json
    );
    assert_eq!(
        parse(&["--logging-format", "text"]).logging_format,
        LogFormat::Text
    );
    let e = parse_err(&["--logging-format=xml"]);
    assert!(
        e.contains("xml") && e.contains("text") && e.contains("json"),
        "{e}"
    );
    let f = parse(&[
        "--profiling=false",
        "--contention-profiling",
        "--log-flush-frequency=5s",
    ]);
    assert_eq!(f.profiling, Some(false));
    assert_eq!(f.contention_profiling, Some(true));
    assert_eq!(f.log_flush_frequency, Some(Duration::from_secs(5)));
    assert_eq!(parse(&["--profiling"]).profiling, Some(true));
    assert_eq!(parse(&["--profiling=true"]).profiling, Some(true));
    assert!(parse_err(&["--log-flush-frequency=0s"]).contains("greater than zero"));
    assert!(parse_err(&["--log-flush-frequency=soon"]).contains("soon"));
}

/// An unknown --logging-format stops the binary before it builds a client.
#[test]
fn the_binary_refuses_an_unknown_logging_format() {
    let out = Command::new(BIN)
        .args([
            "run",
            "--logging-format=xml",
            "--kubeconfig=/nonexistent-kubeconfig",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("[possible values: text, json]"), "{stderr}");
    assert!(!stderr.contains("nonexistent-kubeconfig"), "{stderr}");

    // With json, the error that ends the process is a JSON line too.
    let out = Command::new(BIN)
        .args([
            "run",
            "--logging-format=json",
            "--secure-port=0",
            "--leader-elect=false",
            "--kubeconfig=/nonexistent-kubeconfig",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let last: serde_json::Value = serde_json::from_str(stderr.lines().last().unwrap())
        .unwrap_or_else(|e| panic!("{e}: {stderr}"));
    assert_eq!(last["msg"], "ferrosched run failed");
    assert!(
        last["err"]
            .as_str()
            .unwrap()
            .contains("nonexistent-kubeconfig"),
        "{last}"
    );
    assert!(last.get("v").is_none(), "{last}");
}

#[test]
fn only_the_leases_lock_is_accepted() {
    for lock in ["endpoints", "configmaps", "endpointsleases", "Leases"] {
        let e = parse_err(&[&format!("--leader-elect-resource-lock={lock}")]);
        assert!(e.contains("only \"leases\" is supported"), "{lock}: {e}");
    }
    assert!(parse_err(&["--leader-elect-lease-duration=15"]).contains("15"));
    assert!(parse_err(&["--leader-elect-retry-period=0s"]).contains("greater than zero"));
}

#[test]
fn explicitly_set_leader_election_flags_override_the_config_file() {
    let mut cfg = from_file();
    let f = parse(&[
        "--leader-elect-resource-name=from-flag",
        "--leader-elect-lease-duration=40s",
    ]);
    let warnings = f.apply(&mut cfg, true).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    let le = &cfg.leader_election;
    // Given on the command line: the flag wins.
    assert_eq!(le.resource_name, "from-flag");
    assert_eq!(le.lease_duration, Duration::from_secs(40));
    // Not given: the config file's value stays (not the flag's default).
    assert_eq!(le.resource_namespace, "config-ns");
    assert_eq!(le.renew_deadline, Duration::from_secs(20));
    assert_eq!(le.retry_period, Duration::from_secs(4));
    assert!(le.leader_elect);

    let mut cfg = from_file();
    parse(&["--leader-elect=false"])
        .apply(&mut cfg, true)
        .unwrap();
    assert!(!cfg.leader_election.leader_elect);
}

#[test]
fn leader_election_flags_apply_to_the_defaults_without_a_config_file() {
    let mut cfg = config::from_flags(None, None).unwrap().config;
    parse(&["--leader-elect=false", "--leader-elect-resource-name=x"])
        .apply(&mut cfg, false)
        .unwrap();
    assert!(!cfg.leader_election.leader_elect);
    assert_eq!(cfg.leader_election.resource_name, "x");
    assert_eq!(cfg.leader_election.resource_namespace, "kube-system");
}

#[test]
fn kube_api_qps_and_burst_apply_only_without_a_config_file() {
    let f = parse(&["--kube-api-qps=5", "--kube-api-burst=7"]);
    let mut defaults = config::from_flags(None, None).unwrap().config;
    assert!(f.apply(&mut defaults, false).unwrap().is_empty());
    assert_eq!(
        (
            defaults.client_connection.qps,
            defaults.client_connection.burst
        ),
        (5.0, 7)
    );

    // With --config, as upstream: the config file's values stay; ferrosched warns.
    let mut cfg = from_file();
    let warnings = f.apply(&mut cfg, true).unwrap();
    assert_eq!(
        (cfg.client_connection.qps, cfg.client_connection.burst),
        (77.0, 88)
    );
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(warnings[0].contains("--kube-api-qps is ignored with --config"));

    // --kube-api-content-type likewise (it chooses the node informer's encoding).
    let f = parse(&["--kube-api-content-type=application/json"]);
    let mut defaults = config::from_flags(None, None).unwrap().config;
    assert_eq!(
        defaults.client_connection.content_type,
        "application/vnd.kubernetes.protobuf"
    );
    assert!(f.apply(&mut defaults, false).unwrap().is_empty());
    assert_eq!(defaults.client_connection.content_type, "application/json");
    let mut cfg = from_file();
    let before = cfg.client_connection.content_type.clone();
    let warnings = f.apply(&mut cfg, true).unwrap();
    assert_eq!(cfg.client_connection.content_type, before);
    assert!(
        warnings[0].contains("--kube-api-content-type is ignored with --config"),
        "{warnings:?}"
    );
}

#[test]
fn overrides_that_break_leader_election_are_rejected() {
    // The file's leaseDuration is 30s: a renew deadline of 30s is not below it.
    let mut cfg = from_file();
    let e = parse(&["--leader-elect-renew-deadline=30s"])
        .apply(&mut cfg, true)
        .unwrap_err();
    assert!(
        e.contains("must be greater than renew deadline (30s)"),
        "{e}"
    );
    let mut cfg = from_file();
    let e = parse(&["--leader-elect-retry-period=18s"])
        .apply(&mut cfg, true)
        .unwrap_err();
    assert!(e.contains("retry period (18s) * 1.2"), "{e}");
    // Leader election off: nothing to check.
    let mut cfg = from_file();
    parse(&["--leader-elect=false", "--leader-elect-retry-period=18s"])
        .apply(&mut cfg, true)
        .unwrap();
}

#[test]
fn klog_verbosity_maps_to_tracing_levels_and_rust_log_wins() {
    assert_eq!(verbosity_filter(None), "info");
    assert_eq!(verbosity_filter(Some(2)), "info");
    assert!(verbosity_filter(Some(4)).contains("controller=debug"));
    assert!(verbosity_filter(Some(5)).contains("controller=trace"));
    assert!(verbosity_filter(Some(6)).contains("kube=debug"));
    assert_eq!(verbosity_filter(Some(10)), "trace");
    let f = parse(&["--v=4"]);
    assert_eq!(f.log_filter(Some("warn")), "warn");
    assert_eq!(f.log_filter(Some("")), verbosity_filter(Some(4)));
    assert_eq!(f.log_filter(None), verbosity_filter(Some(4)));
}

#[test]
fn always_allow_paths_default_to_the_health_paths_and_take_a_comma_list() {
    let f = parse(&[]);
    assert_eq!(
        f.authorization_always_allow_paths,
        ["/healthz", "/readyz", "/livez"]
    );
    let f = parse(&["--authorization-always-allow-paths=/healthz,/metrics"]);
    assert_eq!(f.authorization_always_allow_paths, ["/healthz", "/metrics"]);
}

/// The binary: the lock error is clap's usage error (exit 2); a missing
/// --authentication-kubeconfig or --authorization-kubeconfig is named and exits 1.
#[test]
fn the_binary_rejects_other_locks_and_missing_review_kubeconfigs() {
    let out = Command::new(BIN)
        .args(["run", "--leader-elect-resource-lock=endpoints"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("only \"leases\" is supported"), "{stderr}");

    let out = Command::new(BIN)
        .args([
            "run",
            "--secure-port=0",
            "--leader-elect=false",
            "-v=4",
            "--kubeconfig=/nonexistent-kubeconfig",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("nonexistent-kubeconfig"), "{stderr}");

    for flag in ["--authentication-kubeconfig", "--authorization-kubeconfig"] {
        let out = Command::new(BIN)
            .args([
                "run",
                "--secure-port=0",
                "--bind-address=127.0.0.1",
                "--leader-elect=false",
                &format!("{flag}=/nonexistent-review-kubeconfig"),
            ])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{flag}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(&format!(
                "error: kubeconfig: {flag} /nonexistent-review-kubeconfig: no such file"
            )),
            "{stderr}"
        );
    }
}
