//! Client certificates and the front proxy on `controller::run`'s secure port, with real
//! certificates over real TLS: the port asks for a certificate but never requires one
//! (bearer tokens still work), a certificate the client CA signed is its CommonName's user
//! in its Organizations' groups, one from another CA is a 401, the front proxy's
//! certificate makes the `X-Remote-*` headers trusted (and nobody else's does), and the
//! CAs come from the extension-apiserver-authentication ConfigMap when no flag gives them.
//! Also the TLS flags: minimum version, TLS 1.2 suites, SNI-selected pairs, `--cert-dir`.

mod support;

use std::net::SocketAddr;
use std::sync::Arc;

use controller::auth::{DelegatedAuth, RequestHeaderConfig};
use controller::tls;
use controller::x509::CaBundle;
use fake_apiserver::{FakeApiServer, Grant};
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

struct Ca {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

/// A client certificate chain and its key.
type Identity = (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>);

impl Ca {
    fn new(name: &str) -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        Ca {
            issuer: CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap(),
        }
    }

    fn pem(&self) -> String {
        self.issuer.pem()
    }

    fn bundle(&self) -> CaBundle {
        CaBundle::from_pem(self.pem().as_bytes(), "test CA").unwrap()
    }

    /// A client certificate for user `cn` in groups `orgs`.
    fn client(&self, cn: &str, orgs: &[&str]) -> Identity {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(DnType::CommonName, cn);
        for o in orgs {
            params.distinguished_name.push(DnType::OrganizationName, *o);
        }
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        (
            vec![cert.der().clone()],
            PrivateKeyDer::try_from(key.serialize_der()).unwrap(),
        )
    }
}

/// GET `path` over TLS, presenting `identity` when given, with `headers`; the status code
/// and the body.
async fn get(
    addr: SocketAddr,
    path: &str,
    identity: Option<Identity>,
    headers: &[(&str, &str)],
) -> (u16, String) {
    let provider = tls::provider();
    let builder = rustls::ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(tls::NoVerify(provider)));
    let cfg = match identity {
        Some((chain, key)) => builder.with_client_auth_cert(chain, key).unwrap(),
        None => builder.with_no_client_auth(),
    };
    let tcp = TcpStream::connect(addr).await.unwrap();
    let mut s = tokio_rustls::TlsConnector::from(Arc::new(cfg))
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .unwrap();
    let extra: String = headers
        .iter()
        .map(|(k, v)| format!("{k}: {v}\r\n"))
        .collect();
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: x\r\n{extra}\r\n").as_bytes())
        .await
        .unwrap();
    let mut out = Vec::new();
    // The server may close without close_notify after answering; what was read counts.
    let _ = s.read_to_end(&mut out).await;
    let out = String::from_utf8_lossy(&out).into_owned();
    let code = out
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = out.split("\r\n\r\n").nth(1).unwrap_or_default().to_string();
    (code, body)
}

struct Running {
    addr: SocketAddr,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<controller::Result<()>>,
}

/// `controller::run` serving its secure port as `ferrosched run` does (client
/// certificates requested), with `auth`.
async fn start(
    server: &FakeApiServer,
    auth: impl FnOnce(kube::Client) -> DelegatedAuth,
) -> Running {
    start_shared(server, |c| Arc::new(auth(c))).await
}

/// [`start`] with the authenticator already shared (to reload it meanwhile).
async fn start_shared(
    server: &FakeApiServer,
    auth: impl FnOnce(kube::Client) -> Arc<DelegatedAuth>,
) -> Running {
    let client = controller::client(Some(&server.kubeconfig()))
        .await
        .unwrap();
    let loaded = scheduler_core::config::load_str(
        "apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection: {leaderElect: false}
",
        "test.yaml",
    )
    .unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let cert = tls::self_signed(&["localhost".to_string()]).unwrap();
    let tls_cfg = tls::secure_port_config(Arc::new(cert), &tls::TlsOptions::default()).unwrap();
    let (stop, rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(controller::run(controller::RunOptions {
        health: Some(listener),
        health_tls: Some(Arc::new(tls_cfg)),
        health_auth: Some(auth(client.clone())),
        ..controller::RunOptions::new(
            client,
            loaded,
            Box::pin(async move {
                let _ = rx.await;
            }),
        )
    }));
    Running { addr, stop, task }
}

fn delegated(client: kube::Client) -> DelegatedAuth {
    DelegatedAuth::new(
        Some(client.clone()),
        Some(client),
        controller::auth::DEFAULT_ALWAYS_ALLOW_PATHS
            .map(String::from)
            .to_vec(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_from_the_client_ca_scrapes_metrics_and_others_do_not() {
    let server = FakeApiServer::start().await;
    server.grant(Grant::non_resource("alice", "get", "/metrics"));
    server.grant(Grant::non_resource("ops", "get", "/configz"));
    server.add_token("alice-token", "alice", &["system:authenticated"]);
    let client_ca = Ca::new("client-ca");
    let other_ca = Ca::new("other-ca");
    let ca = client_ca.bundle();
    let r = start(&server, |c| delegated(c).with_client_ca(Some(ca))).await;

    let (code, body) = get(
        r.addr,
        "/metrics",
        Some(client_ca.client("alice", &[])),
        &[],
    )
    .await;
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("scheduler_"), "{body}");
    // The Organizations are groups: bob is authorized through "ops".
    let (code, body) = get(
        r.addr,
        "/configz",
        Some(client_ca.client("bob", &["ops"])),
        &[],
    )
    .await;
    assert_eq!(code, 200, "{body}");
    // ... but bob himself may not read /metrics.
    let (code, _) = get(
        r.addr,
        "/metrics",
        Some(client_ca.client("bob", &["ops"])),
        &[],
    )
    .await;
    assert_eq!(code, 403);
    // A certificate from another CA: not authenticated.
    let (code, _) = get(r.addr, "/metrics", Some(other_ca.client("alice", &[])), &[]).await;
    assert_eq!(code, 401);
    // No credentials: anonymous, which RBAC does not let read /metrics (upstream's 403).
    let (code, _) = get(r.addr, "/metrics", None, &[]).await;
    assert_eq!(code, 403);
    // The probes' paths stay open to anonymous clients.
    let (code, _) = get(r.addr, "/healthz", None, &[]).await;
    assert_eq!(code, 200);
    // Certificates are asked for, not required: a bearer token still works.
    let (code, _) = get(
        r.addr,
        "/metrics",
        None,
        &[("Authorization", "Bearer alice-token")],
    )
    .await;
    assert_eq!(code, 200);
    // Users in system:masters are not asked about (upstream's AlwaysAllowGroups).
    let (code, _) = get(
        r.addr,
        "/metrics",
        Some(client_ca.client("root", &["system:masters"])),
        &[],
    )
    .await;
    assert_eq!(code, 200);
    support::stop_controller(r.stop, r.task).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_front_proxy_headers_are_trusted_only_from_the_proxy_certificate() {
    let server = FakeApiServer::start().await;
    server.grant(Grant::non_resource("carol", "get", "/metrics"));
    server.grant(Grant::non_resource("auditors", "get", "/configz"));
    let proxy_ca = Ca::new("front-proxy-ca");
    let client_ca = Ca::new("client-ca");
    let rh = RequestHeaderConfig {
        allowed_names: vec!["front-proxy-client".into()],
        ..RequestHeaderConfig::with_defaults(proxy_ca.bundle())
    };
    let ca = client_ca.bundle();
    let r = start(&server, |c| {
        delegated(c)
            .with_client_ca(Some(ca))
            .with_request_header(Some(rh))
    })
    .await;
    let proxy = || Some(proxy_ca.client("front-proxy-client", &[]));

    let (code, body) = get(r.addr, "/metrics", proxy(), &[("X-Remote-User", "carol")]).await;
    assert_eq!(code, 200, "{body}");
    // Groups come from X-Remote-Group.
    let (code, _) = get(
        r.addr,
        "/configz",
        proxy(),
        &[("x-remote-user", "dave"), ("X-Remote-Group", "auditors")],
    )
    .await;
    assert_eq!(code, 200);
    let (code, _) = get(r.addr, "/configz", proxy(), &[("X-Remote-User", "dave")]).await;
    assert_eq!(code, 403);
    // The same headers from a client certificate of the client CA: not trusted; the
    // request is the certificate's user, who may not read /metrics.
    let (code, _) = get(
        r.addr,
        "/metrics",
        Some(client_ca.client("mallory", &[])),
        &[("X-Remote-User", "carol")],
    )
    .await;
    assert_eq!(code, 403);
    // Without any certificate the headers are ignored too.
    let (code, _) = get(r.addr, "/metrics", None, &[("X-Remote-User", "carol")]).await;
    assert_eq!(code, 403);
    // A front-proxy-CA certificate whose CommonName is not allowed: 401.
    let (code, _) = get(
        r.addr,
        "/metrics",
        Some(proxy_ca.client("someone-else", &[])),
        &[("X-Remote-User", "carol")],
    )
    .await;
    assert_eq!(code, 401);
    support::stop_controller(r.stop, r.task).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_flags_the_cas_come_from_the_extension_apiserver_authentication_configmap() {
    let server = FakeApiServer::start().await;
    server.grant(Grant::non_resource("alice", "get", "/metrics"));
    server.grant(Grant::non_resource("carol", "get", "/metrics"));
    let client_ca = Ca::new("client-ca");
    let proxy_ca = Ca::new("front-proxy-ca");
    let client = controller::client(Some(&server.kubeconfig()))
        .await
        .unwrap();

    // Not there yet: nothing configured, not an error.
    let none = controller::auth::lookup_in_cluster(&client).await.unwrap();
    assert!(none.client_ca.is_none() && none.request_header.is_none());

    server.apply(
        "configmaps",
        &serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"namespace": "kube-system", "name": "extension-apiserver-authentication"},
            "data": {
                "client-ca-file": client_ca.pem(),
                "requestheader-client-ca-file": proxy_ca.pem(),
                "requestheader-allowed-names": "[\"front-proxy-client\"]",
                "requestheader-username-headers": "[\"X-Remote-User\"]",
                "requestheader-group-headers": "[\"X-Remote-Group\"]",
                "requestheader-extra-headers-prefix": "[\"X-Remote-Extra-\"]",
            }
        }),
    );
    let found = controller::auth::lookup_in_cluster(&client).await.unwrap();
    let rh = found.request_header.clone().unwrap();
    assert_eq!(rh.allowed_names, ["front-proxy-client"]);
    assert_eq!(rh.username_headers, ["X-Remote-User"]);
    let r = start(&server, move |c| {
        delegated(c)
            .with_client_ca(found.client_ca)
            .with_request_header(found.request_header)
    })
    .await;
    let (code, body) = get(
        r.addr,
        "/metrics",
        Some(client_ca.client("alice", &[])),
        &[],
    )
    .await;
    assert_eq!(code, 200, "{body}");
    let (code, _) = get(
        r.addr,
        "/metrics",
        Some(proxy_ca.client("front-proxy-client", &[])),
        &[("X-Remote-User", "carol")],
    )
    .await;
    assert_eq!(code, 200);
    let (code, _) = get(r.addr, "/metrics", None, &[]).await;
    assert_eq!(code, 403);
    support::stop_controller(r.stop, r.task).await;

    // A lookup the API server refuses is an error naming the ConfigMap and the fix.
    server.fail_next(1, fake_apiserver::Fault::new("GET", "configmaps", 403));
    let e = controller::auth::lookup_in_cluster(&client)
        .await
        .unwrap_err();
    assert!(
        e.contains("extension-apiserver-authentication") && e.contains("authentication-reader"),
        "{e}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_flags_restrict_versions_and_suites() {
    use controller::tls_options::{MinVersion, parse_cipher_suites};
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let cert = tls::self_signed(&["localhost".to_string()]).unwrap();
    let cfg = tls::secure_port_config(
        Arc::new(cert),
        &tls::TlsOptions {
            min_version: Some(MinVersion::Tls13),
            cipher_suites: None,
        },
    )
    .unwrap();
    let app = axum::Router::new().route("/ok", axum::routing::get(|| async { "ok" }));
    tokio::spawn(tls::serve(
        listener,
        Arc::new(cfg),
        app,
        std::future::pending(),
    ));
    let connect = |versions: &'static [&'static rustls::SupportedProtocolVersion]| async move {
        let provider = tls::provider();
        let cfg = rustls::ClientConfig::builder_with_provider(Arc::clone(&provider))
            .with_protocol_versions(versions)
            .unwrap()
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(tls::NoVerify(provider)))
            .with_no_client_auth();
        let tcp = TcpStream::connect(addr).await.unwrap();
        tokio_rustls::TlsConnector::from(Arc::new(cfg))
            .connect(ServerName::try_from("localhost").unwrap(), tcp)
            .await
    };
    static TLS12_ONLY: [&rustls::SupportedProtocolVersion; 1] = [&rustls::version::TLS12];
    static TLS13_ONLY: [&rustls::SupportedProtocolVersion; 1] = [&rustls::version::TLS13];
    assert!(connect(&TLS12_ONLY).await.is_err());
    assert!(connect(&TLS13_ONLY).await.is_ok());

    // TLS 1.2 with one suite: a client offering only another one fails the handshake.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let cert = tls::self_signed(&["localhost".to_string()]).unwrap();
    let only = parse_cipher_suites(&["TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384".into()]).unwrap();
    let cfg = tls::secure_port_config(
        Arc::new(cert),
        &tls::TlsOptions {
            min_version: None,
            cipher_suites: Some(only),
        },
    )
    .unwrap();
    let app = axum::Router::new().route("/ok", axum::routing::get(|| async { "ok" }));
    tokio::spawn(tls::serve(
        listener,
        Arc::new(cfg),
        app,
        std::future::pending(),
    ));
    let connect12 = |suite: rustls::SupportedCipherSuite| async move {
        let mut p = rustls::crypto::ring::default_provider();
        p.cipher_suites = vec![suite];
        let p = Arc::new(p);
        let cfg = rustls::ClientConfig::builder_with_provider(Arc::clone(&p))
            .with_protocol_versions(&[&rustls::version::TLS12])
            .unwrap()
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(tls::NoVerify(p)))
            .with_no_client_auth();
        let tcp = TcpStream::connect(addr).await.unwrap();
        tokio_rustls::TlsConnector::from(Arc::new(cfg))
            .connect(ServerName::try_from("localhost").unwrap(), tcp)
            .await
    };
    use rustls::crypto::ring::cipher_suite as cs;
    assert!(
        connect12(cs::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384)
            .await
            .is_ok()
    );
    assert!(
        connect12(cs::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256)
            .await
            .is_err()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sni_chooses_the_pair_by_name_and_cert_dir_keeps_its_pair() {
    use controller::tls_options::{SniResolver, cert_dir_pair, parse_sni_cert_key};
    let dir = std::env::temp_dir().join(format!("ferrosched-sni-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let ca = Ca::new("serving-ca");
    let write = |name: &str, sans: Vec<String>| {
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(sans)
            .unwrap()
            .signed_by(&key, &ca.issuer)
            .unwrap();
        let (c, k) = (
            dir.join(format!("{name}.crt")),
            dir.join(format!("{name}.key")),
        );
        std::fs::write(&c, cert.pem()).unwrap();
        std::fs::write(&k, key.serialize_pem()).unwrap();
        (
            format!("{},{}", c.display(), k.display()),
            cert.der().clone(),
        )
    };
    // `a` is for a.example by the flag; `b` by the names in it (a wildcard).
    let (a_files, a_der) = write("a", vec!["ignored.example".into()]);
    let (b_files, b_der) = write("b", vec!["*.b.example".into()]);
    let pairs = [
        parse_sni_cert_key(&format!("{a_files}:a.example")).unwrap(),
        parse_sni_cert_key(&b_files).unwrap(),
    ];
    let (dc, dk) = cert_dir_pair(&dir.join("certs"), &["localhost".into()]).unwrap();
    let default_der = CertificateDer::pem_file_iter(&dc)
        .unwrap()
        .next()
        .unwrap()
        .unwrap();
    let default = Arc::new(tls::ReloadingCert::new(&dc, &dk).unwrap());
    let resolver = SniResolver::new(default, &pairs).unwrap();
    let cfg = tls::secure_port_config(Arc::new(resolver), &tls::TlsOptions::default()).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = axum::Router::new().route("/ok", axum::routing::get(|| async { "ok" }));
    tokio::spawn(tls::serve(
        listener,
        Arc::new(cfg),
        app,
        std::future::pending(),
    ));
    let served = |name: &'static str| async move {
        let provider = tls::provider();
        let cfg = rustls::ClientConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .unwrap()
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(tls::NoVerify(provider)))
            .with_no_client_auth();
        let tcp = TcpStream::connect(addr).await.unwrap();
        let s = tokio_rustls::TlsConnector::from(Arc::new(cfg))
            .connect(ServerName::try_from(name).unwrap(), tcp)
            .await
            .unwrap();
        s.get_ref().1.peer_certificates().unwrap()[0]
            .clone()
            .into_owned()
    };
    assert_eq!(served("a.example").await, a_der);
    assert_eq!(served("x.b.example").await, b_der);
    // Explicit names replace the certificate's own: `a` is not chosen for them.
    assert_eq!(served("ignored.example").await, default_der);
    assert_eq!(served("other.example").await, default_der);

    // --cert-dir: a second start reuses the pair written by the first.
    let (dc2, _) = cert_dir_pair(&dir.join("certs"), &["localhost".into()]).unwrap();
    let again = CertificateDer::pem_file_iter(&dc2)
        .unwrap()
        .next()
        .unwrap()
        .unwrap();
    assert_eq!(again, default_der);
    let _ = std::fs::remove_dir_all(&dir);
}

fn auth_configmap(data: serde_json::Value) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"namespace": "kube-system", "name": "extension-apiserver-authentication"},
        "data": data,
    })
}

/// GETs `/metrics` with `identity` until it answers `want` (the reload runs every 100 ms
/// here); panics after 10 s.
async fn wait_for_code(
    addr: SocketAddr,
    identity: impl Fn() -> Identity,
    headers: &[(&str, &str)],
    want: u16,
) {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let (code, body) = get(addr, "/metrics", Some(identity()), headers).await;
        if code == want {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "still {code} (want {want}): {body}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// A client CA added to the ConfigMap after start (a rotation adds the new CA beside the
/// old) is trusted without a restart; a CA taken out is no longer; a flag's CA is never
/// replaced by the ConfigMap's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ca_added_to_the_configmap_later_is_trusted_after_the_reload() {
    let server = FakeApiServer::start().await;
    server.grant(Grant::non_resource("alice", "get", "/metrics"));
    server.grant(Grant::non_resource("bob", "get", "/metrics"));
    let old_ca = Ca::new("old-client-ca");
    let new_ca = Ca::new("new-client-ca");
    server.apply(
        "configmaps",
        &auth_configmap(serde_json::json!({"client-ca-file": old_ca.pem()})),
    );
    let client = controller::client(Some(&server.kubeconfig()))
        .await
        .unwrap();
    let found = controller::auth::lookup_in_cluster(&client).await.unwrap();
    let version = found.resource_version.clone();
    assert!(version.is_some());
    let r = start_shared(&server, move |c| {
        let auth = Arc::new(delegated(c.clone()).with_client_ca(found.client_ca));
        auth.reload_from_cluster(
            c,
            std::time::Duration::from_millis(100),
            controller::auth::FixedByFlags::default(),
            version,
        );
        auth
    })
    .await;
    let alice = || old_ca.client("alice", &[]);
    let bob = || new_ca.client("bob", &[]);
    let (code, _) = get(r.addr, "/metrics", Some(bob()), &[]).await;
    assert_eq!(code, 401, "a CA nobody configured yet");
    wait_for_code(r.addr, alice, &[], 200).await;

    // Rotation, step one: both CAs in the bundle.
    server.apply(
        "configmaps",
        &auth_configmap(serde_json::json!({
            "client-ca-file": format!("{}{}", old_ca.pem(), new_ca.pem())
        })),
    );
    wait_for_code(r.addr, bob, &[], 200).await;
    let (code, _) = get(r.addr, "/metrics", Some(alice()), &[]).await;
    assert_eq!(code, 200);
    // Step two: the old CA is gone.
    server.apply(
        "configmaps",
        &auth_configmap(serde_json::json!({"client-ca-file": new_ca.pem()})),
    );
    wait_for_code(r.addr, alice, &[], 401).await;
    let (code, _) = get(r.addr, "/metrics", Some(bob()), &[]).await;
    assert_eq!(code, 200);
    support::stop_controller(r.stop, r.task).await;

    // With --client-ca-file given, the ConfigMap's client CA is never taken.
    let flag_ca = old_ca.bundle();
    let version = controller::auth::lookup_in_cluster(&client)
        .await
        .unwrap()
        .resource_version;
    let r = start_shared(&server, move |c| {
        let auth = Arc::new(delegated(c.clone()).with_client_ca(Some(flag_ca)));
        auth.reload_from_cluster(
            c,
            std::time::Duration::from_millis(100),
            controller::auth::FixedByFlags {
                client_ca: true,
                request_header: false,
            },
            version,
        );
        auth
    })
    .await;
    server.apply(
        "configmaps",
        &auth_configmap(serde_json::json!({"client-ca-file": new_ca.pem(), "x": "changed"})),
    );
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let (code, _) = get(r.addr, "/metrics", Some(alice()), &[]).await;
    assert_eq!(code, 200, "the flag's CA stays");
    let (code, _) = get(r.addr, "/metrics", Some(bob()), &[]).await;
    assert_eq!(code, 401, "the ConfigMap's CA is not taken over the flag's");
    support::stop_controller(r.stop, r.task).await;
}

/// `--requestheader-uid-headers` (and the ConfigMap's `requestheader-uid-headers`): the
/// front proxy's UID header becomes the user's UID, which the SubjectAccessReview carries.
/// Without the setting (upstream's default) the header is ignored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_front_proxys_uid_header_is_the_users_uid() {
    let server = FakeApiServer::start().await;
    // Only the UID is granted: the review must carry it.
    server.grant(Grant::non_resource("uid:1234-abcd", "get", "/metrics"));
    let proxy_ca = Ca::new("front-proxy-ca");
    server.apply(
        "configmaps",
        &auth_configmap(serde_json::json!({
            "requestheader-client-ca-file": proxy_ca.pem(),
            "requestheader-username-headers": "[\"X-Remote-User\"]",
            "requestheader-uid-headers": "[\"X-Remote-Uid\"]",
        })),
    );
    let client = controller::client(Some(&server.kubeconfig()))
        .await
        .unwrap();
    let found = controller::auth::lookup_in_cluster(&client).await.unwrap();
    let rh = found.request_header.clone().unwrap();
    assert_eq!(rh.uid_headers, ["X-Remote-Uid"]);
    let r = start(&server, move |c| delegated(c).with_request_header(Some(rh))).await;
    let proxy = || Some(proxy_ca.client("front-proxy-client", &[]));
    let headers = [("X-Remote-User", "dave"), ("X-Remote-Uid", "1234-abcd")];
    let (code, body) = get(r.addr, "/metrics", proxy(), &headers).await;
    assert_eq!(code, 200, "{body}");
    let (code, _) = get(
        r.addr,
        "/metrics",
        proxy(),
        &[("X-Remote-User", "dave"), ("X-Remote-Uid", "other")],
    )
    .await;
    assert_eq!(code, 403);
    support::stop_controller(r.stop, r.task).await;

    // Not configured (the flag's default): the header is not read, so dave has no UID.
    let bundle = proxy_ca.bundle();
    let r = start(&server, move |c| {
        delegated(c).with_request_header(Some(RequestHeaderConfig::with_defaults(bundle)))
    })
    .await;
    let (code, _) = get(r.addr, "/metrics", proxy(), &headers).await;
    assert_eq!(code, 403);
    support::stop_controller(r.stop, r.task).await;
}

/// `--client-ca-file`'s file is re-read: replacing it (a rotated CA) takes effect without a
/// restart; a file that does not parse keeps the last bundle.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_client_ca_file_is_trusted_after_the_reload() {
    let server = FakeApiServer::start().await;
    server.grant(Grant::non_resource("alice", "get", "/metrics"));
    server.grant(Grant::non_resource("bob", "get", "/metrics"));
    let old_ca = Ca::new("old-client-ca");
    let new_ca = Ca::new("new-client-ca");
    let dir = std::env::temp_dir().join(format!("ferrosched-ca-file-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("client-ca.crt");
    std::fs::write(&file, old_ca.pem()).unwrap();
    let bundle = CaBundle::from_file(&file).unwrap();
    let path = file.clone();
    let r = start_shared(&server, move |c| {
        let auth = Arc::new(delegated(c).with_client_ca(Some(bundle)));
        auth.reload_ca_files(Some(path), None, std::time::Duration::from_millis(100));
        auth
    })
    .await;
    let alice = || old_ca.client("alice", &[]);
    let bob = || new_ca.client("bob", &[]);
    wait_for_code(r.addr, alice, &[], 200).await;
    let (code, _) = get(r.addr, "/metrics", Some(bob()), &[]).await;
    assert_eq!(code, 401);
    // A half-written file is not used.
    std::fs::write(&file, "-----BEGIN CERTIFICATE-----\nnot base64\n").unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    let (code, _) = get(r.addr, "/metrics", Some(alice()), &[]).await;
    assert_eq!(code, 200, "the last bundle stays");
    std::fs::write(&file, new_ca.pem()).unwrap();
    wait_for_code(r.addr, bob, &[], 200).await;
    let (code, _) = get(r.addr, "/metrics", Some(alice()), &[]).await;
    assert_eq!(code, 401);
    support::stop_controller(r.stop, r.task).await;
    let _ = std::fs::remove_dir_all(&dir);
}
