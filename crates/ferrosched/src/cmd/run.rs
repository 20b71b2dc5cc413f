//! `ferrosched run`: schedule a real cluster's pending pods.
//!
//! The config is loaded and validated before any network call: a bad config exits 1 with
//! its errors. Runs until SIGTERM or SIGINT, then stops taking pods, finishes in-flight
//! bindings and exits 0.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Args;
use ferrosched::flags::KubeSchedulerFlags;
use scheduler_core::config;

#[derive(Args, Debug)]
pub struct RunArgs {
    /// KubeSchedulerConfiguration file (kubescheduler.config.k8s.io/v1). Without it,
    /// kube-scheduler's default profile.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Kubeconfig file. Without it: the config's clientConnection.kubeconfig, then
    /// $KUBECONFIG, ~/.kube/config, then in-cluster.
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// Name of the single default profile (legacy flag; only without --config).
    #[arg(long, value_name = "NAME", conflicts_with = "config")]
    scheduler_name: Option<String>,
    /// Legacy: InterPodAffinity's hardPodAffinityWeight for the default profile (0-100; only
    /// without --config).
    #[arg(long, value_name = "WEIGHT", conflicts_with = "config")]
    hard_pod_affinity_symmetric_weight: Option<i32>,
    /// Seed for breaking score ties.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Address for /healthz, /livez, /readyz, /metrics and /configz.
    #[arg(long, value_name = "IP", default_value = "0.0.0.0")]
    bind_address: std::net::IpAddr,
    /// HTTPS port for /healthz, /livez, /readyz, /metrics and /configz; 0 disables them.
    /// Same port and scheme as kube-scheduler.
    #[arg(long, value_name = "PORT", default_value_t = 10259)]
    secure_port: u16,
    /// PEM certificate for the HTTPS port (re-read when the file changes). Without it and
    /// --tls-private-key-file, a self-signed certificate is made at start, as kube-scheduler
    /// does.
    #[arg(long, value_name = "FILE", requires = "tls_private_key_file")]
    tls_cert_file: Option<PathBuf>,
    /// PEM private key of --tls-cert-file.
    #[arg(long, value_name = "FILE", requires = "tls_cert_file")]
    tls_private_key_file: Option<PathBuf>,
    /// Record each attempt's explanation and keep each pending pod's last one (at most
    /// --explain-max-pods), served on the secure port at /debug/explain (the list) and
    /// /debug/explain/NAMESPACE/POD, behind the same authorization as /metrics. Off by
    /// default; see docs/explain.md for what it costs.
    #[arg(long)]
    explain: bool,
    /// How many pending pods' explanations --explain keeps (the oldest go first).
    #[arg(long, value_name = "N", default_value_t = controller::explain::DEFAULT_MAX_PODS, requires = "explain")]
    explain_max_pods: usize,
    /// Write kube-scheduler-simulator's result annotations (scheduler-simulator/filter-result,
    /// score-result, finalscore-result, selected-node) on every pod this profile attempts,
    /// so the simulator's web UI can show them. Repeat for several profiles. Needs `patch`
    /// on pods (manifests/explain/run-rbac.yaml).
    #[arg(long = "explain-annotations", value_name = "PROFILE")]
    explain_annotations: Vec<String>,
    /// Feature gates, as kube-scheduler's `--feature-gates=Name=bool,...`. ferrosched knows
    /// OpportunisticBatching, DRADeviceBindingConditions and DRAResourceClaimDeviceStatus
    /// (default true), DRAWorkloadResourceClaims, DRADeviceCompatibilityGroups and
    /// CompositePodGroup (default false, as upstream's 1.37);
    /// any other name is refused.
    #[arg(long, value_name = "NAME=BOOL,...")]
    feature_gates: Option<String>,
    /// kube-scheduler's own flags (boxed: they would make `run` the largest subcommand).
    #[command(flatten)]
    kube_scheduler: Box<KubeSchedulerFlags>,
}

/// The secure port's TLS config: the given files, else the pair in `--cert-dir` (made on
/// first start), else a self-signed certificate for this host; `--tls-sni-cert-key` pairs
/// by name; `--tls-min-version` and `--tls-cipher-suites`; client certificates requested.
/// Errors here (a missing or bad file, a bad flag) end the process before any network call.
fn secure_port_tls(args: &RunArgs) -> Result<Arc<rustls::ServerConfig>, String> {
    use controller::{tls, tls_options};
    let flags = &args.kube_scheduler;
    let options = tls::TlsOptions {
        min_version: flags
            .tls_min_version
            .as_deref()
            .map(tls_options::parse_min_version)
            .transpose()?,
        cipher_suites: if flags.tls_cipher_suites.is_empty() {
            None
        } else {
            Some(tls_options::parse_cipher_suites(&flags.tls_cipher_suites)?)
        },
    };
    let sni = flags
        .tls_sni_cert_key
        .iter()
        .map(|v| tls_options::parse_sni_cert_key(v))
        .collect::<Result<Vec<_>, _>>()?;
    let mut hosts = vec![controller::default_instance_id(), "localhost".to_string()];
    if !args.bind_address.is_unspecified() {
        hosts.push(args.bind_address.to_string());
    }
    hosts.push("127.0.0.1".to_string());
    let err = |e: controller::Error| e.to_string();
    let default: Arc<dyn rustls::server::ResolvesServerCert> = match (
        &args.tls_cert_file,
        &args.tls_private_key_file,
        &flags.cert_dir,
    ) {
        (Some(cert), Some(key), _) => Arc::new(tls::ReloadingCert::new(cert, key).map_err(err)?),
        (_, _, Some(dir)) => {
            let (cert, key) = tls_options::cert_dir_pair(dir, &hosts).map_err(err)?;
            Arc::new(tls::ReloadingCert::new(cert, key).map_err(|e| format!("--cert-dir: {e}"))?)
        }
        _ => Arc::new(tls::self_signed(&hosts).map_err(err)?),
    };
    let resolver: Arc<dyn rustls::server::ResolvesServerCert> = if sni.is_empty() {
        default
    } else {
        Arc::new(tls_options::SniResolver::new(default, &sni).map_err(err)?)
    };
    Ok(Arc::new(
        tls::secure_port_config(resolver, &options).map_err(err)?,
    ))
}

/// The client CA and the front proxy given on the command line (read now: a bad file
/// stops the process before any network call).
fn flag_authentication(
    flags: &KubeSchedulerFlags,
) -> Result<controller::auth::ClusterAuthentication, String> {
    use controller::auth::{ClusterAuthentication, RequestHeaderConfig};
    use controller::x509::CaBundle;
    let read = |flag: &str, path: &std::path::Path| {
        CaBundle::from_file(path).map_err(|e| format!("{flag}: {e}"))
    };
    Ok(ClusterAuthentication {
        client_ca: flags
            .client_ca_file
            .as_deref()
            .map(|p| read("--client-ca-file", p))
            .transpose()?,
        request_header: match &flags.requestheader_client_ca_file {
            None => None,
            Some(p) => Some(RequestHeaderConfig {
                ca: read("--requestheader-client-ca-file", p)?,
                allowed_names: flags.requestheader_allowed_names.clone(),
                username_headers: flags.requestheader_username_headers.clone(),
                uid_headers: flags.requestheader_uid_headers.clone(),
                group_headers: flags.requestheader_group_headers.clone(),
                extra_headers_prefixes: flags.requestheader_extra_headers_prefix.clone(),
            }),
        },
        resource_version: None,
    })
}

/// Fills what the flags left out from the extension-apiserver-authentication ConfigMap, as
/// kube-scheduler: a failed read is a warning with --authentication-tolerate-lookup-failure
/// (the default), else an error before serving.
async fn complete_from_cluster(
    flags: &KubeSchedulerFlags,
    mut auth: controller::auth::ClusterAuthentication,
    authn: Option<&kube::Client>,
) -> Result<controller::auth::ClusterAuthentication, controller::Error> {
    if flags.authentication_skip_lookup
        || (auth.client_ca.is_some() && auth.request_header.is_some())
    {
        return Ok(auth);
    }
    let Some(client) = authn else {
        tracing::warn!(
            "no --authentication-kubeconfig and no in-cluster config to read \
             configmap/extension-apiserver-authentication in kube-system: client certificates \
             authenticate only with --client-ca-file and --requestheader-client-ca-file"
        );
        return Ok(auth);
    };
    match controller::auth::lookup_in_cluster(client).await {
        Ok(found) => {
            auth.client_ca = auth.client_ca.or(found.client_ca);
            auth.request_header = auth.request_header.or(found.request_header);
            auth.resource_version = found.resource_version;
            Ok(auth)
        }
        Err(e) if flags.authentication_tolerate_lookup_failure => {
            tracing::warn!(
                error = %e,
                "cannot look up the in-cluster authentication configuration; continuing \
                 without it (client certificates may not authenticate; to make this fatal, \
                 set --authentication-tolerate-lookup-failure=false)"
            );
            Ok(auth)
        }
        Err(e) => Err(controller::Error::Config(format!(
            "cannot look up the in-cluster authentication configuration: {e} \
             (--authentication-tolerate-lookup-failure=false)"
        ))),
    }
}

pub fn run(args: &RunArgs) -> ExitCode {
    let loaded = match &args.config {
        Some(f) => config::load_file(f),
        None => config::from_flags(
            args.scheduler_name.as_deref(),
            args.hard_pod_affinity_symmetric_weight,
        ),
    };
    let mut loaded = match loaded {
        Ok(l) => l,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    for w in &loaded.warnings {
        eprintln!("{w}");
    }
    // kube-scheduler's flags override the config (leader election) or fill it (client rate
    // limits without --config), then are checked again.
    let flags = &args.kube_scheduler;
    match flags.apply(&mut loaded.config, args.config.is_some()) {
        Ok(warnings) => {
            for w in warnings {
                eprintln!("warning: {w}");
            }
        }
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    }
    let gates = match FeatureGates::parse(args.feature_gates.as_deref().unwrap_or_default()) {
        Ok(g) => g,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    for (flag, path) in [
        (
            "--authentication-kubeconfig",
            &flags.authentication_kubeconfig,
        ),
        (
            "--authorization-kubeconfig",
            &flags.authorization_kubeconfig,
        ),
    ] {
        if let Some(p) = path
            && let Err(e) = controller::auth::check_file(flag, p)
        {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    }
    let rust_log = std::env::var("RUST_LOG").ok();
    let filter = flags.log_filter(rust_log.as_deref());
    let filter = tracing_subscriber::EnvFilter::try_new(&filter).unwrap_or_else(|e| {
        eprintln!("warning: bad log filter {filter:?} ({e}); logging at info");
        "info".into()
    });
    let (tls, flag_authn) = if args.secure_port == 0 {
        (None, Default::default())
    } else {
        match secure_port_tls(args).and_then(|t| Ok((Some(t), flag_authentication(flags)?))) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::FAILURE;
            }
        }
    };
    ferrosched::logging::init(flags.logging_format, filter);
    let rt = match super::runtime(super::Threads::One) {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    let result = rt.block_on(async {
        let health = if args.secure_port == 0 {
            None
        } else {
            let addr = std::net::SocketAddr::new(args.bind_address, args.secure_port);
            match tokio::net::TcpListener::bind(addr).await {
                Ok(l) => Some(l),
                Err(e) => {
                    return Err(controller::Error::Listen(format!(
                        "cannot listen on {addr} for health checks: {e}"
                    )));
                }
            }
        };
        let from_config = &loaded.config.client_connection.kubeconfig;
        let kubeconfig = args
            .kubeconfig
            .clone()
            .or_else(|| (!from_config.is_empty()).then(|| PathBuf::from(from_config)));
        // The review clients first: a missing --authentication-kubeconfig is a config error.
        let health_auth = if health.is_some() {
            let authn = controller::auth::review_client(
                "--authentication-kubeconfig",
                flags.authentication_kubeconfig.as_deref(),
            )
            .await?;
            let authz = controller::auth::review_client(
                "--authorization-kubeconfig",
                flags.authorization_kubeconfig.as_deref(),
            )
            .await?;
            let fixed = controller::auth::FixedByFlags {
                client_ca: flag_authn.client_ca.is_some(),
                request_header: flag_authn.request_header.is_some(),
            };
            let certs = complete_from_cluster(flags, flag_authn, authn.as_ref()).await?;
            let reload = authn
                .clone()
                .filter(|_| !flags.authentication_skip_lookup)
                .filter(|_| !(fixed.client_ca && fixed.request_header));
            let auth = Arc::new(
                controller::auth::DelegatedAuth::new(
                    authn,
                    authz,
                    flags.authorization_always_allow_paths.clone(),
                )
                .with_client_ca(certs.client_ca)
                .with_request_header(certs.request_header),
            );
            // As upstream's dynamic CA controllers: a changed CA file or ConfigMap (a
            // rotated client or front-proxy CA) takes effect without a restart.
            if flags.client_ca_file.is_some() || flags.requestheader_client_ca_file.is_some() {
                auth.reload_ca_files(
                    flags.client_ca_file.clone(),
                    flags.requestheader_client_ca_file.clone(),
                    controller::auth::CONFIGMAP_RELOAD_PERIOD,
                );
            }
            if let Some(client) = reload {
                auth.reload_from_cluster(
                    client,
                    controller::auth::CONFIGMAP_RELOAD_PERIOD,
                    fixed,
                    certs.resource_version,
                );
            }
            Some(auth)
        } else {
            None
        };
        let client = controller::client(kubeconfig.as_deref()).await?;
        let extensions = scheduling_policy::extensions(&loaded);
        controller::run(controller::RunOptions {
            client,
            loaded,
            instance_id: controller::default_instance_id(),
            shutdown: Box::pin(shutdown_signal()),
            seed: args.seed,
            health,
            health_tls: tls,
            health_auth,
            health_limits: controller::conn::ServeLimits::secure_port(),
            // For /flagz: the flags as given after `run`.
            command_line: std::env::args()
                .skip_while(|a| a != "run")
                .skip(1)
                .collect(),
            extensions,
            explain: controller::explain::ExplainOptions {
                serve: args.explain,
                max_pods: args.explain_max_pods,
                annotate_profiles: args.explain_annotations.iter().cloned().collect(),
            },
            opportunistic_batching: gates.opportunistic_batching,
            dra_device_binding_conditions: gates.dra_device_binding_conditions
                && gates.dra_resource_claim_device_status,
            dra_workload_resource_claims: gates.dra_workload_resource_claims,
            dra_device_compatibility_groups: gates.dra_device_compatibility_groups,
            composite_pod_groups: gates.composite_pod_group,
        })
        .await
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // Once logging is set up, a JSON log stream stays JSON to its last line.
            if flags.logging_format == ferrosched::logging::LogFormat::Json {
                tracing::error!(error = %e, "ferrosched run failed");
            } else {
                eprintln!("error: {e}");
            }
            ExitCode::FAILURE
        }
    }
}

/// SIGTERM (how Kubernetes stops a pod) or SIGINT.
pub(crate) async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// The feature gates `ferrosched run` honours (`--feature-gates`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FeatureGates {
    /// OpportunisticBatching (upstream beta, on by default since 1.35).
    opportunistic_batching: bool,
    /// DRADeviceBindingConditions (upstream beta, on by default since 1.36).
    dra_device_binding_conditions: bool,
    /// DRAResourceClaimDeviceStatus (upstream beta, on by default since 1.33); binding
    /// conditions need it, as upstream's.
    dra_resource_claim_device_status: bool,
    /// DRAWorkloadResourceClaims (upstream alpha in 1.36, beta but off by default in 1.37):
    /// PodGroup claims reserved for the group and shared by its pods.
    dra_workload_resource_claims: bool,
    /// DRADeviceCompatibilityGroups (upstream alpha in 1.37, off by default): counter-set
    /// compatibility groups enforced; off, devices declaring them are skipped.
    dra_device_compatibility_groups: bool,
    /// CompositePodGroup (upstream alpha in 1.37, off by default): trees of PodGroups.
    composite_pod_group: bool,
}

impl FeatureGates {
    const KNOWN: &[&str] = &[
        "OpportunisticBatching",
        "DRADeviceBindingConditions",
        "DRAResourceClaimDeviceStatus",
        "DRAWorkloadResourceClaims",
        "DRADeviceCompatibilityGroups",
        "CompositePodGroup",
    ];

    /// Parses `Name=bool,Name=bool` (empty: the defaults). A gate ferrosched does not
    /// implement is an error rather than silently ignored.
    fn parse(text: &str) -> Result<Self, String> {
        let mut gates = FeatureGates {
            opportunistic_batching: true,
            dra_device_binding_conditions: true,
            dra_resource_claim_device_status: true,
            dra_workload_resource_claims: false,
            dra_device_compatibility_groups: false,
            composite_pod_group: false,
        };
        for item in text.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let Some((name, value)) = item.split_once('=') else {
                return Err(format!(
                    "--feature-gates: {item:?} is not NAME=true or NAME=false"
                ));
            };
            let (name, value) = (name.trim(), value.trim());
            let on = match value.to_ascii_lowercase().as_str() {
                "true" => true,
                "false" => false,
                _ => {
                    return Err(format!(
                        "--feature-gates: {name}={value:?}: the value must be true or false"
                    ));
                }
            };
            match name {
                "OpportunisticBatching" => gates.opportunistic_batching = on,
                "DRADeviceBindingConditions" => gates.dra_device_binding_conditions = on,
                "DRAResourceClaimDeviceStatus" => gates.dra_resource_claim_device_status = on,
                "DRAWorkloadResourceClaims" => gates.dra_workload_resource_claims = on,
                "DRADeviceCompatibilityGroups" => gates.dra_device_compatibility_groups = on,
                "CompositePodGroup" => gates.composite_pod_group = on,
                _ => {
                    return Err(format!(
                        "--feature-gates: feature gate {name:?} is not implemented by ferrosched (known: {})",
                        Self::KNOWN.join(", ")
                    ));
                }
            }
        }
        Ok(gates)
    }
}

#[cfg(test)]
mod feature_gate_tests {
    use super::FeatureGates;

    #[test]
    fn device_binding_condition_gates_default_on_and_turn_off() {
        let g = FeatureGates::parse("").unwrap();
        assert!(g.dra_device_binding_conditions && g.dra_resource_claim_device_status);
        let g = FeatureGates::parse("DRADeviceBindingConditions=false").unwrap();
        assert!(!g.dra_device_binding_conditions && g.dra_resource_claim_device_status);
        let g = FeatureGates::parse("DRAResourceClaimDeviceStatus=false").unwrap();
        assert!(g.dra_device_binding_conditions && !g.dra_resource_claim_device_status);
    }

    #[test]
    fn pod_group_claims_follow_upstreams_default_off() {
        assert!(
            !FeatureGates::parse("")
                .unwrap()
                .dra_workload_resource_claims
        );
        let g = FeatureGates::parse("DRAWorkloadResourceClaims=true").unwrap();
        assert!(g.dra_workload_resource_claims);
    }

    #[test]
    fn device_compatibility_groups_follow_upstreams_alpha_default_off() {
        assert!(
            !FeatureGates::parse("")
                .unwrap()
                .dra_device_compatibility_groups
        );
        let g = FeatureGates::parse("DRADeviceCompatibilityGroups=true").unwrap();
        assert!(g.dra_device_compatibility_groups);
    }

    #[test]
    fn composite_pod_groups_follow_upstreams_alpha_default_off() {
        assert!(!FeatureGates::parse("").unwrap().composite_pod_group);
        assert!(
            FeatureGates::parse("CompositePodGroup=true")
                .unwrap()
                .composite_pod_group
        );
    }

    #[test]
    fn feature_gates_parse_like_kube_scheduler_and_refuse_unknown_names() {
        assert!(FeatureGates::parse("").unwrap().opportunistic_batching);
        assert!(
            !FeatureGates::parse("OpportunisticBatching=false")
                .unwrap()
                .opportunistic_batching
        );
        assert!(
            FeatureGates::parse(" OpportunisticBatching = True ,")
                .unwrap()
                .opportunistic_batching
        );
        let e = FeatureGates::parse("OpportunisticBatching=false,SchedulerAsyncAPICalls=true")
            .unwrap_err();
        assert_eq!(
            e,
            "--feature-gates: feature gate \"SchedulerAsyncAPICalls\" is not implemented by ferrosched (known: OpportunisticBatching, DRADeviceBindingConditions, DRAResourceClaimDeviceStatus, DRAWorkloadResourceClaims, DRADeviceCompatibilityGroups, CompositePodGroup)"
        );
        assert_eq!(
            FeatureGates::parse("OpportunisticBatching").unwrap_err(),
            "--feature-gates: \"OpportunisticBatching\" is not NAME=true or NAME=false"
        );
        assert_eq!(
            FeatureGates::parse("OpportunisticBatching=maybe").unwrap_err(),
            "--feature-gates: OpportunisticBatching=\"maybe\": the value must be true or false"
        );
    }
}
