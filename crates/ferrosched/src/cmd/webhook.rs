//! `ferrosched webhook`: the SchedulingPolicy admission webhook (defaults on `/mutate`,
//! denials on `/validate`, `/healthz`) over HTTPS. See `docs/scheduling-policy.md`.
//!
//! The certificate and key are read before any network call, so a missing or bad pair exits
//! 1 at once; afterwards they are re-read whenever the files change. Runs until SIGTERM or
//! SIGINT.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use controller::tls::ReloadingCert;
use scheduling_policy::webhook;

#[derive(Args, Debug)]
pub struct WebhookArgs {
    /// PEM certificate chain to serve (re-read when the file changes).
    #[arg(long, value_name = "FILE")]
    tls_cert_file: PathBuf,
    /// PEM private key of the certificate (re-read when the file changes).
    #[arg(long, value_name = "FILE")]
    tls_private_key_file: PathBuf,
    /// Address to listen on.
    #[arg(long, value_name = "IP", default_value = "0.0.0.0")]
    bind_address: std::net::IpAddr,
    /// HTTPS port for /mutate, /validate and /healthz.
    #[arg(long, value_name = "PORT", default_value_t = 8443)]
    secure_port: u16,
    /// Kubeconfig file. Without it: $KUBECONFIG, ~/.kube/config, then in-cluster.
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// Seconds a SubjectAccessReview that allowed a policy is remembered.
    #[arg(long, value_name = "SECONDS", default_value_t = 30)]
    authorized_ttl: u64,
    /// Seconds a SubjectAccessReview that denied a policy is remembered.
    #[arg(long, value_name = "SECONDS", default_value_t = 10)]
    unauthorized_ttl: u64,
    /// PEM CA bundle: /mutate and /validate then need a client certificate it signed (the
    /// API server's, configured in its AdmissionConfiguration kubeconfig); /healthz stays
    /// open. Read once at start.
    #[arg(long, value_name = "FILE")]
    client_ca_file: Option<PathBuf>,
}

pub fn run(args: &WebhookArgs) -> ExitCode {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .try_init();
    let cert = match ReloadingCert::new(&args.tls_cert_file, &args.tls_private_key_file) {
        Ok(c) => Arc::new(c),
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let rt = match super::runtime(super::Threads::Two) {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    let result = rt.block_on(async {
        let addr = std::net::SocketAddr::new(args.bind_address, args.secure_port);
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| controller::Error::Listen(format!("cannot listen on {addr}: {e}")))?;
        let client = controller::client(args.kubeconfig.as_deref()).await?;
        webhook::run(webhook::WebhookOptions {
            client,
            listener,
            cert,
            allowed_ttl: Duration::from_secs(args.authorized_ttl),
            denied_ttl: Duration::from_secs(args.unauthorized_ttl),
            limits: controller::conn::ServeLimits::default(),
            client_ca: args.client_ca_file.clone(),
            shutdown: Box::pin(super::run::shutdown_signal()),
        })
        .await
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
