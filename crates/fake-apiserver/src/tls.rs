//! HTTPS as kube-apiserver serves it: TLS offering ALPN `h2` and `http/1.1`, HTTP/2 when the
//! client takes it. A client that speaks HTTP/2 (client-go, ferrosched's) sends every
//! request over one connection; over plain HTTP it would open a connection per request in
//! flight. That difference cost ferrosched 40% CPU per pod and 11 MiB against a real server
//! (`benches/reports/2026-11-23-real-apiserver.md`) while the plain-HTTP fake could not show
//! it; [`crate::FakeApiServer::start_tls`] serves this way and counts connections and
//! protocol versions so tests can.

use std::sync::Arc;

use axum::Router;
use base64::Engine;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::service::TowerToHyperService;
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use rustls::pki_types::PrivateKeyDer;
use rustls::pki_types::pem::PemObject;

use crate::Shared;

/// The server's certificate, signed by a CA made for this server alone.
pub(crate) struct Tls {
    acceptor: tokio_rustls::TlsAcceptor,
    /// The CA certificate in PEM, for the kubeconfig's `certificate-authority-data`.
    pub(crate) ca_pem: String,
}

/// A serving configuration for `hosts` with a certificate from a CA made for it alone,
/// offering the `alpn` protocols; and that CA's certificate in PEM, for clients to trust
/// (a kubeconfig's `certificate-authority-data`, a webhook's `caBundle`).
pub fn server_config(hosts: &[&str], alpn: &[&[u8]]) -> (rustls::ServerConfig, String) {
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(hosts.iter().map(|h| h.to_string()).collect::<Vec<_>>())
        .unwrap()
        .signed_by(&key, &ca)
        .unwrap();
    let mut cfg = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(
        vec![cert.der().clone()],
        PrivateKeyDer::from_pem_slice(key.serialize_pem().as_bytes()).unwrap(),
    )
    .unwrap();
    cfg.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    let ca_pem = format!(
        "-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n",
        base64::engine::general_purpose::STANDARD.encode(ca.der().as_ref())
    );
    (cfg, ca_pem)
}

impl Tls {
    pub(crate) fn new() -> Tls {
        // kube-apiserver's order: HTTP/2 preferred.
        let (cfg, ca_pem) = server_config(&["127.0.0.1", "localhost"], &[b"h2", b"http/1.1"]);
        Tls {
            acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(cfg)),
            ca_pem,
        }
    }
}

/// Serves `app` over TLS on `listener` until aborted, HTTP/2 or HTTP/1.1 as ALPN settled,
/// counting accepted connections in the store.
pub(crate) fn serve(
    listener: tokio::net::TcpListener,
    app: Router,
    tls: Arc<Tls>,
    inner: Shared,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            inner.store.lock().unwrap().connections += 1;
            let (acceptor, app) = (tls.acceptor.clone(), app.clone());
            tokio::spawn(async move {
                let Ok(stream) = acceptor.accept(tcp).await else {
                    return;
                };
                let h2 = stream.get_ref().1.alpn_protocol() == Some(b"h2");
                let io = TokioIo::new(stream);
                let service = TowerToHyperService::new(app);
                if h2 {
                    let _ = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                        .serve_connection(io, service)
                        .await;
                } else {
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(io, service)
                        .with_upgrades()
                        .await;
                }
            });
        }
    })
}
