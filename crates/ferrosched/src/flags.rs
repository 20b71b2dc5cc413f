//! kube-scheduler's command-line flags that `ferrosched run` understands, so kube-scheduler's
//! command lines (kubeadm's static pod, Helm charts) work unchanged:
//!
//! * leader election (`--leader-elect*`): an explicitly given flag overrides the config's
//!   `leaderElection` field, with or without `--config` (upstream `ApplyLeaderElectionTo`);
//! * `--kube-api-qps` / `--kube-api-burst` / `--kube-api-content-type`: deprecated upstream
//!   and, as there, applied only
//!   without `--config` (upstream `ApplyDeprecated`); with `--config` they are ignored (with a
//!   warning here);
//! * `-v` / `--v=N`: klog verbosity mapped to a tracing filter (`RUST_LOG` wins when set);
//! * `--authentication-kubeconfig` / `--authorization-kubeconfig` /
//!   `--authorization-always-allow-paths`: delegated authentication and authorization of the
//!   secure port, as kube-scheduler (`controller::auth`);
//! * client certificates and the front proxy (`--client-ca-file`, `--requestheader-*`,
//!   `--authentication-tolerate-lookup-failure`, `--authentication-skip-lookup`), and the
//!   TLS serving flags (`--cert-dir`, `--tls-min-version`, `--tls-cipher-suites`,
//!   `--tls-sni-cert-key`), as kube-scheduler's secure serving (checked before any network
//!   call: a bad one is an error naming the flag);
//! * `--logging-format=text|json` ([`crate::logging`]); `--log-flush-frequency` is accepted
//!   and validated, with no effect (lines are written unbuffered, each as it is logged);
//! * `--profiling` / `--contention-profiling`: accepted (`true` or `false`) with no effect:
//!   ferrosched serves no `/debug/pprof`.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use scheduler_core::config::{
    ClientConnectionConfiguration, KubeSchedulerConfiguration, LeaderElectionConfiguration,
    format_go_duration, parse_go_duration,
};

use crate::logging::LogFormat;

/// The only lock client-go still implements.
pub const RESOURCE_LOCK_LEASES: &str = "leases";

/// client-go's leader-election JitterFactor: renewDeadline must exceed retryPeriod times this.
const JITTER: f64 = 1.2;

#[derive(Args, Debug, Clone, Default, PartialEq)]
pub struct KubeSchedulerFlags {
    /// Take part in leader election and schedule only while holding the lease
    /// (`--leader-elect` or `--leader-elect=false`). Overrides leaderElection.leaderElect.
    #[arg(
        long,
        value_name = "BOOL",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true",
        value_parser = clap::builder::BoolishValueParser::new(),
    )]
    pub leader_elect: Option<bool>,
    /// How long standbys wait after the last renewal before taking the lease, e.g. 15s.
    /// Overrides leaderElection.leaseDuration.
    #[arg(long, value_name = "DURATION", value_parser = go_duration)]
    pub leader_elect_lease_duration: Option<Duration>,
    /// How long the leader keeps trying to renew before it gives up, e.g. 10s. Overrides
    /// leaderElection.renewDeadline.
    #[arg(long, value_name = "DURATION", value_parser = go_duration)]
    pub leader_elect_renew_deadline: Option<Duration>,
    /// How often candidates try to acquire or renew, e.g. 2s. Overrides
    /// leaderElection.retryPeriod.
    #[arg(long, value_name = "DURATION", value_parser = go_duration)]
    pub leader_elect_retry_period: Option<Duration>,
    /// The lock object type; only `leases` is supported. Overrides leaderElection.resourceLock.
    #[arg(long, value_name = "TYPE", value_parser = resource_lock)]
    pub leader_elect_resource_lock: Option<String>,
    /// Name of the Lease. Overrides leaderElection.resourceName.
    #[arg(long, value_name = "NAME")]
    pub leader_elect_resource_name: Option<String>,
    /// Namespace of the Lease. Overrides leaderElection.resourceNamespace.
    #[arg(long, value_name = "NAMESPACE")]
    pub leader_elect_resource_namespace: Option<String>,
    /// Deprecated (as in kube-scheduler): API requests per second; only without --config,
    /// where it sets clientConnection.qps.
    #[arg(long, value_name = "QPS")]
    pub kube_api_qps: Option<f32>,
    /// Deprecated (as in kube-scheduler): API request burst; only without --config, where it
    /// sets clientConnection.burst.
    #[arg(long, value_name = "BURST")]
    pub kube_api_burst: Option<i32>,
    /// Deprecated (as in kube-scheduler): the content type of API requests; only without
    /// --config, where it sets clientConnection.contentType (`application/json` reads nodes
    /// as JSON instead of protobuf).
    #[arg(long, value_name = "TYPE")]
    pub kube_api_content_type: Option<String>,
    /// klog-style log verbosity (`-v=4`, `--v=4`): 0-2 info, 3-4 debug, 5 trace for
    /// ferrosched's crates, 6-7 also debug for the Kubernetes client, 8+ trace for
    /// everything. RUST_LOG, when set, wins.
    #[arg(short = 'v', long = "v", value_name = "LEVEL")]
    pub verbosity: Option<u8>,
    /// Kubeconfig for the TokenReviews that authenticate requests to the secure port.
    /// Without it, the in-cluster service account (as kube-scheduler).
    #[arg(long, value_name = "FILE")]
    pub authentication_kubeconfig: Option<PathBuf>,
    /// Kubeconfig for the SubjectAccessReviews that authorize requests to the secure port.
    /// Without it, the in-cluster service account (as kube-scheduler).
    #[arg(long, value_name = "FILE")]
    pub authorization_kubeconfig: Option<PathBuf>,
    /// Paths served without authorization (a trailing `*` matches a prefix), comma
    /// separated.
    #[arg(
        long,
        value_name = "PATHS",
        value_delimiter = ',',
        default_values_t = controller::auth::DEFAULT_ALWAYS_ALLOW_PATHS.map(String::from)
    )]
    pub authorization_always_allow_paths: Vec<String>,
    /// CA bundle (PEM) for client certificates: one it signed authenticates as the user of
    /// its CommonName, in the groups of its Organizations. Without it, the `client-ca-file`
    /// of the kube-system/extension-apiserver-authentication ConfigMap (as kube-scheduler).
    #[arg(long, value_name = "FILE")]
    pub client_ca_file: Option<PathBuf>,
    /// CA bundle (PEM) of the front proxy (the API server's aggregator): a request with a
    /// client certificate it signed is the user the --requestheader-username-headers name.
    /// Without it, the ConfigMap's `requestheader-*` keys (as kube-scheduler).
    #[arg(long, value_name = "FILE")]
    pub requestheader_client_ca_file: Option<PathBuf>,
    /// CommonNames the front proxy's certificate may have (comma separated); empty: any
    /// certificate the front-proxy CA signed.
    #[arg(long, value_name = "NAMES", value_delimiter = ',')]
    pub requestheader_allowed_names: Vec<String>,
    /// Headers naming the user of a front-proxy request (the first present wins).
    #[arg(long, value_name = "HEADERS", value_delimiter = ',', default_values_t = ["x-remote-user".to_string()])]
    pub requestheader_username_headers: Vec<String>,
    /// Headers naming the UID of a front-proxy request's user (the first present wins;
    /// X-Remote-Uid is usual). Empty by default, as kube-scheduler's (1.32+).
    #[arg(long, value_name = "HEADERS", value_delimiter = ',')]
    pub requestheader_uid_headers: Vec<String>,
    /// Headers listing the groups of a front-proxy request.
    #[arg(long, value_name = "HEADERS", value_delimiter = ',', default_values_t = ["x-remote-group".to_string()])]
    pub requestheader_group_headers: Vec<String>,
    /// Header prefixes of a front-proxy request's extra user attributes.
    #[arg(long, value_name = "PREFIXES", value_delimiter = ',', default_values_t = ["x-remote-extra-".to_string()])]
    pub requestheader_extra_headers_prefix: Vec<String>,
    /// When true (the default, as kube-scheduler), a failed read of the
    /// extension-apiserver-authentication ConfigMap is a warning (client certificates then
    /// do not authenticate); when false it stops the scheduler before it serves.
    #[arg(
        long,
        value_name = "BOOL",
        num_args = 0..=1,
        require_equals = true,
        default_value_t = true,
        default_missing_value = "true",
        value_parser = clap::builder::BoolishValueParser::new(),
    )]
    pub authentication_tolerate_lookup_failure: bool,
    /// Do not read the extension-apiserver-authentication ConfigMap at all.
    #[arg(
        long,
        value_name = "BOOL",
        num_args = 0..=1,
        require_equals = true,
        default_value_t = false,
        default_missing_value = "true",
        value_parser = clap::builder::BoolishValueParser::new(),
    )]
    pub authentication_skip_lookup: bool,
    /// Where the self-signed serving pair (kube-scheduler.crt, kube-scheduler.key) is kept
    /// when --tls-cert-file is not given: made on first start, reused after a restart.
    /// Without it, a new pair is made in memory at every start.
    #[arg(long, value_name = "DIR")]
    pub cert_dir: Option<PathBuf>,
    /// Lowest TLS version served: VersionTLS12 (the default) or VersionTLS13.
    #[arg(long, value_name = "VERSION")]
    pub tls_min_version: Option<String>,
    /// TLS 1.2 cipher suites to offer, Go's names, comma separated (TLS 1.3's are always on).
    #[arg(long, value_name = "SUITES", value_delimiter = ',')]
    pub tls_cipher_suites: Vec<String>,
    /// An extra serving pair chosen by the name the client asks for (SNI):
    /// `CERT,KEY` (the names in the certificate) or `CERT,KEY:NAME,*.DOMAIN`; repeatable.
    #[arg(long, value_name = "CERT,KEY[:NAMES]")]
    pub tls_sni_cert_key: Vec<String>,
    /// Log line format: `text` (default) or `json` (one JSON object per line with ts,
    /// caller, msg, v and the key/values, as kube-scheduler's).
    #[arg(long, value_name = "FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub logging_format: LogFormat,
    /// Accepted for compatibility (must be a duration greater than zero, e.g. 5s); no
    /// effect: ferrosched writes each log line as it is logged, unbuffered.
    #[arg(long, value_name = "DURATION", value_parser = go_duration)]
    pub log_flush_frequency: Option<Duration>,
    /// Accepted for compatibility (`--profiling`, `--profiling=false`); no effect:
    /// ferrosched serves no /debug/pprof.
    #[arg(
        long,
        value_name = "BOOL",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true",
        value_parser = clap::builder::BoolishValueParser::new(),
    )]
    pub profiling: Option<bool>,
    /// Accepted for compatibility (`--contention-profiling[=BOOL]`); no effect, as
    /// --profiling.
    #[arg(
        long,
        value_name = "BOOL",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true",
        value_parser = clap::builder::BoolishValueParser::new(),
    )]
    pub contention_profiling: Option<bool>,
}

fn go_duration(s: &str) -> Result<Duration, String> {
    let d = parse_go_duration(s)?;
    if d.is_zero() {
        return Err("must be greater than zero".into());
    }
    Ok(d)
}

fn resource_lock(s: &str) -> Result<String, String> {
    if s == RESOURCE_LOCK_LEASES {
        Ok(s.to_string())
    } else {
        Err(format!(
            "only \"{RESOURCE_LOCK_LEASES}\" is supported (the endpoints and configmaps locks \
             were removed from Kubernetes)"
        ))
    }
}

impl KubeSchedulerFlags {
    /// Upstream `ApplyLeaderElectionTo`: every leader-election flag given on the command line
    /// replaces the config's value; the others leave it alone.
    pub fn apply_leader_election_to(&self, le: &mut LeaderElectionConfiguration) {
        if let Some(v) = self.leader_elect {
            le.leader_elect = v;
        }
        if let Some(d) = self.leader_elect_lease_duration {
            le.lease_duration = d;
        }
        if let Some(d) = self.leader_elect_renew_deadline {
            le.renew_deadline = d;
        }
        if let Some(d) = self.leader_elect_retry_period {
            le.retry_period = d;
        }
        if let Some(v) = &self.leader_elect_resource_lock {
            le.resource_lock = v.clone();
        }
        if let Some(v) = &self.leader_elect_resource_name {
            le.resource_name = v.clone();
        }
        if let Some(v) = &self.leader_elect_resource_namespace {
            le.resource_namespace = v.clone();
        }
    }

    /// Upstream `ApplyDeprecated` (the part ferrosched has): `--kube-api-qps`,
    /// `--kube-api-burst`, `--kube-api-content-type`.
    pub fn apply_client_connection_to(&self, cc: &mut ClientConnectionConfiguration) {
        if let Some(t) = self
            .kube_api_content_type
            .as_ref()
            .filter(|t| !t.is_empty())
        {
            cc.content_type = t.clone();
        }
        if let Some(q) = self.kube_api_qps {
            cc.qps = q;
        }
        if let Some(b) = self.kube_api_burst {
            cc.burst = b;
        }
    }

    /// Applies the flags to a loaded config as kube-scheduler does: leader election always,
    /// the deprecated client flags only when there is no config file. Returns warnings, or
    /// an error when the resulting leader election settings cannot work.
    pub fn apply(
        &self,
        cfg: &mut KubeSchedulerConfiguration,
        from_config_file: bool,
    ) -> Result<Vec<String>, String> {
        let mut warnings = Vec::new();
        if from_config_file {
            for (given, flag, field) in [
                (self.kube_api_qps.is_some(), "--kube-api-qps", "qps"),
                (self.kube_api_burst.is_some(), "--kube-api-burst", "burst"),
                (
                    self.kube_api_content_type.is_some(),
                    "--kube-api-content-type",
                    "contentType",
                ),
            ] {
                if given {
                    warnings.push(format!(
                        "{flag} is ignored with --config (as in kube-scheduler); set \
                         clientConnection.{field} in the config file"
                    ));
                }
            }
        } else {
            self.apply_client_connection_to(&mut cfg.client_connection);
        }
        self.apply_leader_election_to(&mut cfg.leader_election);
        check_leader_election(&cfg.leader_election)?;
        Ok(warnings)
    }

    /// The tracing filter to log with: `RUST_LOG` when set and not empty, else the one for
    /// `-v` ([`verbosity_filter`]).
    pub fn log_filter(&self, rust_log: Option<&str>) -> String {
        match rust_log.filter(|s| !s.trim().is_empty()) {
            Some(env) => env.to_string(),
            None => verbosity_filter(self.verbosity).to_string(),
        }
    }
}

/// klog verbosity to a tracing filter. kube-scheduler logs routine progress at V(2)-V(3),
/// per-pod detail at V(4)-V(5) and client-go request traces at V(6)+.
pub fn verbosity_filter(v: Option<u8>) -> &'static str {
    match v.unwrap_or(0) {
        0..=2 => "info",
        3..=4 => "info,controller=debug,scheduler_core=debug,ferrosched=debug",
        5 => "info,controller=trace,scheduler_core=trace,ferrosched=trace",
        6..=7 => "info,controller=trace,scheduler_core=trace,ferrosched=trace,kube=debug",
        _ => "trace",
    }
}

/// The leader-election checks config validation makes, again after the flags were applied
/// (upstream validates the config after `ApplyLeaderElectionTo` too).
fn check_leader_election(le: &LeaderElectionConfiguration) -> Result<(), String> {
    if !le.leader_elect {
        return Ok(());
    }
    let fmt = format_go_duration;
    if le.lease_duration <= le.renew_deadline {
        return Err(format!(
            "leader election: lease duration ({}) must be greater than renew deadline ({}) \
             (--leader-elect-lease-duration, --leader-elect-renew-deadline or leaderElection \
             in the config)",
            fmt(le.lease_duration),
            fmt(le.renew_deadline)
        ));
    }
    if le.renew_deadline.as_secs_f64() <= JITTER * le.retry_period.as_secs_f64() {
        return Err(format!(
            "leader election: renew deadline ({}) must be greater than retry period ({}) * 1.2 \
             (--leader-elect-renew-deadline, --leader-elect-retry-period or leaderElection in \
             the config)",
            fmt(le.renew_deadline),
            fmt(le.retry_period)
        ));
    }
    if le.resource_name.is_empty() || le.resource_namespace.is_empty() {
        return Err("leader election: the lease needs a name and a namespace \
             (--leader-elect-resource-name, --leader-elect-resource-namespace)"
            .into());
    }
    Ok(())
}
