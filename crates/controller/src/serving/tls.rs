//! HTTPS serving for the admission webhook and `ferrosched run`'s health and metrics port:
//! a serving certificate from files, re-read when they change, or (like kube-scheduler
//! without `--tls-cert-file`) a self-signed one made at start.
//!
//! Certificates are rotated by replacing the files (cert-manager, a Secret volume's symlink
//! swap). Each TLS handshake reads both files (a few KiB; the API server keeps its
//! connections open, so handshakes are rare) and loads the pair again when either content
//! changed, so rotation needs no restart and drops no connection. Contents rather than
//! modification times: a rewrite within the file system's timestamp granularity is still
//! seen. A pair that does not load (a half-written file, a key that does not match) is not
//! used: the old one keeps serving, and the pair is tried again once the files change again.

use std::fs;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_rustls::TlsAcceptor;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use crate::serving::conn::{self, ServeLimits};
use crate::{Error, Result};

/// The contents of the two files (None: unreadable), what identifies one version of them.
type Stamp = [Option<Vec<u8>>; 2];

fn stamp(cert: &Path, key: &Path) -> Stamp {
    [cert, key].map(|p| fs::read(p).ok())
}

struct Current {
    stamp: Stamp,
    key: Arc<CertifiedKey>,
    /// The last stamp that failed to load, so a bad pair is logged once.
    failed: Option<Stamp>,
}

/// A [`ResolvesServerCert`] over a PEM certificate chain file and a PEM private key file.
pub struct ReloadingCert {
    cert_path: PathBuf,
    key_path: PathBuf,
    provider: Arc<CryptoProvider>,
    current: Mutex<Current>,
}

impl std::fmt::Debug for ReloadingCert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReloadingCert")
            .field("cert", &self.cert_path)
            .field("key", &self.key_path)
            .finish()
    }
}

/// The crypto provider: ring, chosen explicitly (no process-wide default is installed).
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn load(cert: &Path, key: &Path, provider: &CryptoProvider) -> Result<CertifiedKey> {
    let bad = |what: &Path, e: &dyn std::fmt::Display| {
        Error::Certificate(format!("{}: {e}", what.display()))
    };
    let chain = CertificateDer::pem_file_iter(cert)
        .map_err(|e| bad(cert, &e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(cert, &e))?;
    if chain.is_empty() {
        return Err(bad(cert, &"no PEM certificate"));
    }
    let private = PrivateKeyDer::from_pem_file(key).map_err(|e| bad(key, &e))?;
    CertifiedKey::from_der(chain, private, provider).map_err(|e| bad(key, &e))
}

impl ReloadingCert {
    /// Loads the pair now: a server must not start without a usable certificate.
    pub fn new(cert_path: impl Into<PathBuf>, key_path: impl Into<PathBuf>) -> Result<Self> {
        let (cert_path, key_path) = (cert_path.into(), key_path.into());
        let provider = provider();
        let stamp = stamp(&cert_path, &key_path);
        let key = Arc::new(load(&cert_path, &key_path, &provider)?);
        Ok(ReloadingCert {
            cert_path,
            key_path,
            provider,
            current: Mutex::new(Current {
                stamp,
                key,
                failed: None,
            }),
        })
    }

    /// The pair to serve, reloaded first if the files changed.
    pub fn current(&self) -> Arc<CertifiedKey> {
        let now = stamp(&self.cert_path, &self.key_path);
        let mut cur = self.current.lock().unwrap_or_else(|e| e.into_inner());
        if now != cur.stamp && cur.failed.as_ref() != Some(&now) {
            match load(&self.cert_path, &self.key_path, &self.provider) {
                Ok(k) => {
                    tracing::info!(cert = %self.cert_path.display(), "serving certificate reloaded");
                    cur.key = Arc::new(k);
                    cur.stamp = now;
                    cur.failed = None;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "new serving certificate not usable; keeping the old one");
                    cur.failed = Some(now);
                }
            }
        }
        Arc::clone(&cur.key)
    }
}

impl ResolvesServerCert for ReloadingCert {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

/// A pair made once and served as is.
#[derive(Debug)]
pub struct StaticCert(Arc<CertifiedKey>);

impl ResolvesServerCert for StaticCert {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(Arc::clone(&self.0))
    }
}

/// A self-signed certificate for `hosts` (DNS names or IP addresses), valid for a year, as
/// kube-scheduler makes when it is given no certificate: probes and Prometheus connect
/// without verifying it.
pub fn self_signed(hosts: &[String]) -> Result<StaticCert> {
    let (cert, key) = self_signed_der(hosts)?;
    let private = PrivateKeyDer::try_from(key.serialize_der())
        .map_err(|e| Error::Certificate(e.to_string()))?;
    let pair = CertifiedKey::from_der(vec![cert.der().clone()], private, &provider())
        .map_err(|e| Error::Certificate(e.to_string()))?;
    Ok(StaticCert(Arc::new(pair)))
}

/// [`self_signed`]'s certificate and PKCS#8 key as PEM, to write to `--cert-dir`.
pub fn self_signed_pem(hosts: &[String]) -> Result<(String, String)> {
    let (cert, key) = self_signed_der(hosts)?;
    Ok((cert.pem(), key.serialize_pem()))
}

fn self_signed_der(hosts: &[String]) -> Result<(rcgen::Certificate, rcgen::KeyPair)> {
    let key = rcgen::KeyPair::generate().map_err(|e| Error::Certificate(e.to_string()))?;
    let mut params = rcgen::CertificateParams::new(hosts.to_vec())
        .map_err(|e| Error::Certificate(e.to_string()))?;
    params.distinguished_name.push(
        rcgen::DnType::CommonName,
        format!(
            "{}@ferrosched",
            hosts.first().map_or("localhost", String::as_str)
        ),
    );
    let now = std::time::SystemTime::now();
    params.not_before = now.into();
    params.not_after = (now + Duration::from_secs(365 * 24 * 3600)).into();
    let cert = params
        .self_signed(&key)
        .map_err(|e| Error::Certificate(e.to_string()))?;
    Ok((cert, key))
}

/// A TLS 1.2/1.3 server config (ring) answering with `cert`'s current pair, HTTP/1.1 only.
pub fn server_config(cert: Arc<dyn ResolvesServerCert>) -> Result<rustls::ServerConfig> {
    server_config_with_client_ca(cert, None)
}

/// [`server_config`] that also asks clients for a certificate signed by a CA of the PEM
/// bundle `client_ca` (read once, now). A client without one still connects (the kubelet's
/// probes present none), and its requests carry an empty [`PeerCertificate`]; a client
/// whose certificate the CA did not sign fails the handshake.
pub fn server_config_with_client_ca(
    cert: Arc<dyn ResolvesServerCert>,
    client_ca: Option<&Path>,
) -> Result<rustls::ServerConfig> {
    let builder = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Certificate(e.to_string()))?;
    let builder = match client_ca {
        None => builder.with_no_client_auth(),
        Some(path) => {
            let bad = |e: &dyn std::fmt::Display| {
                Error::Certificate(format!("client CA {}: {e}", path.display()))
            };
            let mut roots = rustls::RootCertStore::empty();
            for c in CertificateDer::pem_file_iter(path).map_err(|e| bad(&e))? {
                roots.add(c.map_err(|e| bad(&e))?).map_err(|e| bad(&e))?;
            }
            if roots.is_empty() {
                return Err(bad(&"no PEM certificate"));
            }
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                Arc::new(roots),
                provider(),
            )
            .allow_unauthenticated()
            .build()
            .map_err(|e| bad(&e))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut cfg = builder.with_cert_resolver(cert);
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(cfg)
}

/// What the TLS handshake established about the client, on every request's extensions:
/// its certificate when it presented one (`.0`), and the intermediates it sent after it
/// (`.1`). A server config with a client CA ([`server_config_with_client_ca`]) accepts
/// only certificates that CA signed, so a certificate there is a verified one; one that
/// requests any certificate ([`secure_port_config`]) leaves verifying to the handler (it
/// only checked that the client holds the certificate's key).
#[derive(Clone, Debug, Default)]
pub struct PeerCertificate(
    pub Option<CertificateDer<'static>>,
    pub Vec<CertificateDer<'static>>,
);

/// How `run`'s secure port speaks TLS (`--tls-min-version`, `--tls-cipher-suites`; see
/// [`crate::serving::tls_options`]).
#[derive(Clone, Debug, Default)]
pub struct TlsOptions {
    /// `None`: TLS 1.2 and 1.3.
    pub min_version: Option<crate::serving::tls_options::MinVersion>,
    /// The TLS 1.2 suites to offer; `None`: rustls' defaults. TLS 1.3's are always on (Go
    /// does not let them be configured either).
    pub cipher_suites: Option<Vec<rustls::SupportedCipherSuite>>,
}

/// Asks every client for a certificate and accepts any (or none) in the handshake, as Go's
/// `tls.RequestClientCert`: only the possession of its key is checked there; which CA
/// signed it is the authenticator's question ([`crate::serving::auth`]), so a client of
/// another CA is a 401 rather than a failed handshake, and bearer tokens still work.
#[derive(Debug)]
struct RequestAnyClientCert(Arc<CryptoProvider>);

impl rustls::server::danger::ClientCertVerifier for RequestAnyClientCert {
    fn offer_client_auth(&self) -> bool {
        true
    }
    fn client_auth_mandatory(&self) -> bool {
        false
    }
    fn root_hint_subjects(&self) -> &[rustls::DistinguishedName] {
        &[]
    }
    fn verify_client_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: rustls::pki_types::UnixTime,
    ) -> Result<rustls::server::danger::ClientCertVerified, rustls::Error> {
        Ok(rustls::server::danger::ClientCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        handshake_signature(&self.0, Tls::V12, message, cert, dss)
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        handshake_signature(&self.0, Tls::V13, message, cert, dss)
    }
    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// `run`'s secure port: `cert`'s pairs, client certificates requested (never required,
/// verified by the authenticator), the protocol versions and TLS 1.2 suites of `options`,
/// HTTP/1.1.
pub fn secure_port_config(
    cert: Arc<dyn ResolvesServerCert>,
    options: &TlsOptions,
) -> Result<rustls::ServerConfig> {
    let mut provider = rustls::crypto::ring::default_provider();
    if let Some(suites) = &options.cipher_suites {
        provider
            .cipher_suites
            .retain(|s| s.version() == &rustls::version::TLS13 || suites.contains(s));
    }
    let versions: &[&'static rustls::SupportedProtocolVersion] = match options.min_version {
        Some(crate::serving::tls_options::MinVersion::Tls13) => &[&rustls::version::TLS13],
        _ => rustls::DEFAULT_VERSIONS,
    };
    let provider = Arc::new(provider);
    let mut cfg = rustls::ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_protocol_versions(versions)
        .map_err(|e| Error::Certificate(e.to_string()))?
        .with_client_cert_verifier(Arc::new(RequestAnyClientCert(provider)))
        .with_cert_resolver(cert);
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(cfg)
}

/// Serves `app` over TLS on `listener` with the default [`ServeLimits`] until `shutdown`
/// resolves.
pub async fn serve(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    app: Router,
    shutdown: impl Future<Output = ()>,
) {
    serve_with(listener, tls, app, ServeLimits::default(), shutdown).await;
}

/// Serves `app` over TLS on `listener` until `shutdown` resolves. Each connection is its own
/// task, so a slow handshake does not hold up the others; each is bounded by `limits`
/// ([`crate::serving::conn`]), and a connection over `limits.max_connections` is closed as
/// soon as it is accepted.
pub async fn serve_with(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    app: Router,
    limits: ServeLimits,
    shutdown: impl Future<Output = ()>,
) {
    let acceptor = TlsAcceptor::from(tls);
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let mut refused: u64 = 0;
    tokio::pin!(shutdown);
    loop {
        let tcp = tokio::select! {
            r = listener.accept() => r,
            _ = &mut shutdown => return,
        };
        let (tcp, peer) = match tcp {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of file descriptors and the like: do not spin.
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
            // Closed at once: queued, it would hold a descriptor and let a flood of
            // connections delay every legitimate one.
            drop(tcp);
            refused += 1;
            if refused.is_power_of_two() {
                tracing::warn!(
                    %peer,
                    max = limits.max_connections,
                    refused,
                    "too many open connections; closing new ones"
                );
            }
            continue;
        };
        let (acceptor, app) = (acceptor.clone(), app.clone());
        tokio::spawn(async move {
            let _slot = slot;
            let stream =
                match tokio::time::timeout(limits.handshake_timeout, acceptor.accept(tcp)).await {
                    Ok(Ok(s)) => s,
                    Ok(Err(e)) => {
                        tracing::debug!(error = %e, "TLS handshake failed");
                        return;
                    }
                    Err(_) => {
                        tracing::debug!(%peer, "TLS handshake timed out");
                        return;
                    }
                };
            let chain = stream.get_ref().1.peer_certificates().unwrap_or_default();
            let client = PeerCertificate(
                chain.first().map(|c| c.clone().into_owned()),
                chain
                    .iter()
                    .skip(1)
                    .map(|c| c.clone().into_owned())
                    .collect(),
            );
            let watch = conn::Watch::new(limits);
            let io = conn::Guarded::new(stream, Arc::clone(&watch));
            let served = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(io), conn::service(app, watch, client))
                .await;
            if let Err(e) = served {
                tracing::debug!(%peer, error = %e, "connection ended with an error");
            }
        });
    }
}

/// Accepts any server certificate (signatures still checked), as Go's InsecureSkipVerify:
/// an extender over HTTPS without a CA, as kube-scheduler's; tests of self-signed servers.
#[derive(Debug)]
pub struct NoVerify(pub Arc<CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for NoVerify {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &rustls::pki_types::ServerName<'_>,
        _: &[u8],
        _: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        handshake_signature(&self.0, Tls::V12, message, cert, dss)
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        handshake_signature(&self.0, Tls::V13, message, cert, dss)
    }
    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// Which handshake a signature comes from.
#[derive(Clone, Copy)]
enum Tls {
    V12,
    V13,
}

/// The handshake's signature checked with `provider`'s algorithms: what every verifier here
/// does, whatever it decides about the certificate itself.
fn handshake_signature(
    provider: &CryptoProvider,
    version: Tls,
    message: &[u8],
    cert: &CertificateDer<'_>,
    dss: &rustls::DigitallySignedStruct,
) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
    let algorithms = &provider.signature_verification_algorithms;
    match version {
        Tls::V12 => rustls::crypto::verify_tls12_signature(message, cert, dss, algorithms),
        Tls::V13 => rustls::crypto::verify_tls13_signature(message, cert, dss, algorithms),
    }
}
