//! `ferrosched run`'s secure port as a process, with kube-scheduler's hardened flags: bad
//! TLS and authentication flags exit 1 before touching the cluster; with only the
//! authentication kubeconfig, a client certificate signed by the cluster's client CA (from
//! the extension-apiserver-authentication ConfigMap) scrapes /metrics; `--cert-dir` keeps
//! the serving certificate across a restart; `/flagz` and `/statusz` answer.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fake_apiserver::{FakeApiServer, Grant};
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const BIN: &str = env!("CARGO_BIN_EXE_ferrosched");

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "ferrosched-secure-port-{}-{name}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `ferrosched run` with `args`: its exit code and stderr.
fn run_fails(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(BIN)
        .arg("run")
        .args(args)
        .args(["--kubeconfig", "/nonexistent/kubeconfig"])
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn bad_tls_and_authentication_flags_exit_1_naming_the_flag() {
    for (args, expect) in [
        (
            &["--tls-min-version=VersionTLS10"][..],
            "--tls-min-version VersionTLS10: ferrosched's TLS (rustls) supports TLS 1.2 and 1.3 only; use VersionTLS12",
        ),
        (
            &["--tls-cipher-suites=TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS_RSA_WITH_RC4_128_SHA"]
                [..],
            "--tls-cipher-suites: TLS_RSA_WITH_RC4_128_SHA is insecure",
        ),
        (
            &["--tls-sni-cert-key=only-a-cert.pem"][..],
            "--tls-sni-cert-key \"only-a-cert.pem\": expected CERTFILE,KEYFILE",
        ),
        (
            &["--tls-sni-cert-key=/nonexistent/a.crt,/nonexistent/a.key"][..],
            "--tls-sni-cert-key: ",
        ),
        (
            &["--client-ca-file=/nonexistent/ca.crt"][..],
            "--client-ca-file: /nonexistent/ca.crt",
        ),
        (
            &["--requestheader-client-ca-file=/nonexistent/proxy.crt"][..],
            "--requestheader-client-ca-file: /nonexistent/proxy.crt",
        ),
    ] {
        let (code, stderr) = run_fails(args);
        assert_eq!(code, Some(1), "{args:?}: {stderr}");
        assert!(stderr.contains(expect), "{args:?}: {stderr}");
        assert!(
            !stderr.contains("kubeconfig"),
            "no client was built: {stderr}"
        );
    }
}

struct Ca(CertifiedIssuer<'static, KeyPair>);

impl Ca {
    fn new() -> Self {
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.distinguished_name.push(DnType::CommonName, "cluster-ca");
        Ca(CertifiedIssuer::self_signed(p, KeyPair::generate().unwrap()).unwrap())
    }

    fn client(&self, cn: &str) -> (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>) {
        let key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.distinguished_name.push(DnType::CommonName, cn);
        p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let cert = p.signed_by(&key, &self.0).unwrap();
        (
            vec![cert.der().clone()],
            PrivateKeyDer::try_from(key.serialize_der()).unwrap(),
        )
    }
}

/// One GET over TLS: (status, body, the server's certificate).
async fn get(
    port: u16,
    path: &str,
    identity: Option<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)>,
) -> std::io::Result<(u16, String, CertificateDer<'static>)> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let b = rustls::ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(controller::tls::NoVerify(provider)));
    let cfg = match identity {
        Some((chain, key)) => b.with_client_auth_cert(chain, key).unwrap(),
        None => b.with_no_client_auth(),
    };
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    let mut tls = tokio_rustls::TlsConnector::from(Arc::new(cfg))
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await?;
    let served = tls.get_ref().1.peer_certificates().unwrap()[0]
        .clone()
        .into_owned();
    tls.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .await?;
    let mut raw = Vec::new();
    let _ = tls.read_to_end(&mut raw).await;
    let text = String::from_utf8_lossy(&raw).to_string();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_string();
    Ok((status, body, served))
}

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// Starts `ferrosched run` on `port` with the hardened flags and `--cert-dir dir`, and
/// waits (at most 10 s) until its secure port answers.
async fn start(server: &FakeApiServer, port: u16, dir: &Path) -> Child {
    let child = Command::new(BIN)
        .args(["run", "--bind-address", "127.0.0.1", "--secure-port"])
        .arg(port.to_string())
        .arg("--kubeconfig")
        .arg(server.kubeconfig())
        .arg("--authentication-kubeconfig")
        .arg(server.kubeconfig())
        .arg("--authorization-kubeconfig")
        .arg(server.kubeconfig())
        .arg("--cert-dir")
        .arg(dir)
        .args([
            "--profiling=false",
            "--tls-min-version=VersionTLS12",
            "--tls-cipher-suites=TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
            "--leader-elect=false",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while get(port, "/healthz", None).await.is_err() {
        assert!(Instant::now() < deadline, "the secure port did not open");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    child
}

fn stop(mut child: Child) {
    use rustix::process::{Pid, Signal, kill_process};
    kill_process(Pid::from_child(&child), Signal::TERM).expect("SIGTERM");
    assert!(child.wait().unwrap().success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hardened_flags_client_certificates_from_the_cluster_ca_and_a_kept_certificate() {
    let server = FakeApiServer::start().await;
    let ca = Ca::new();
    server.apply(
        "configmaps",
        &json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"namespace": "kube-system", "name": "extension-apiserver-authentication"},
            "data": {"client-ca-file": ca.0.pem()}
        }),
    );
    server.grant(Grant::non_resource("prometheus", "get", "/metrics"));
    server.grant(Grant::non_resource("prometheus", "get", "/flagz"));
    server.grant(Grant::non_resource("prometheus", "get", "/statusz"));
    let dir = temp_dir("cert-dir");
    let port = free_port();
    let child = start(&server, port, &dir).await;
    let (status, body, first) = get(port, "/metrics", Some(ca.client("prometheus")))
        .await
        .unwrap();
    assert_eq!(status, 200, "{body}");
    let (status, _, _) = get(port, "/metrics", None).await.unwrap();
    assert_eq!(status, 403);
    let (status, _, _) = get(port, "/metrics", Some(Ca::new().client("prometheus")))
        .await
        .unwrap();
    assert_eq!(status, 401);
    let (status, flagz, _) = get(port, "/flagz", Some(ca.client("prometheus")))
        .await
        .unwrap();
    assert_eq!(status, 200, "{flagz}");
    assert!(
        flagz.lines().any(|l| l == "tls-min-version=VersionTLS12"),
        "{flagz}"
    );
    assert!(flagz.lines().any(|l| l == "profiling=false"), "{flagz}");
    assert!(
        flagz
            .lines()
            .any(|l| l == format!("cert-dir={}", dir.display())),
        "{flagz}"
    );
    let (status, statusz, _) = get(port, "/statusz", Some(ca.client("prometheus")))
        .await
        .unwrap();
    assert_eq!(status, 200, "{statusz}");
    assert!(statusz.starts_with("ferrosched statusz"), "{statusz}");
    assert!(statusz.contains("\nStarted: "), "{statusz}");
    assert!(statusz.contains("\nPaths: "), "{statusz}");
    stop(child);
    assert!(dir.join("kube-scheduler.crt").is_file() && dir.join("kube-scheduler.key").is_file());
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.join("kube-scheduler.key"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o077, 0, "the key is private: {mode:o}");
    }

    // Restarted with the same --cert-dir: the same serving certificate.
    let child = start(&server, port, &dir).await;
    let (_, _, second) = get(port, "/healthz", None).await.unwrap();
    assert_eq!(first, second);
    stop(child);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_configmap_lookup_is_fatal_only_when_not_tolerated() {
    let server = FakeApiServer::start().await;
    // Tolerated (the default, as kube-scheduler): a warning, and the port serves.
    server.fail_next(1, fake_apiserver::Fault::new("GET", "configmaps", 403));
    let dir = temp_dir("tolerated");
    let child = start(&server, free_port(), &dir).await;
    stop(child);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        server.requests().iter().any(|r| r.resource == "configmaps"),
        "the ConfigMap was asked for"
    );
    server.fail_next(1, fake_apiserver::Fault::new("GET", "configmaps", 403));
    let out = Command::new(BIN)
        .args(["run", "--bind-address", "127.0.0.1", "--secure-port"])
        .arg(free_port().to_string())
        .arg("--kubeconfig")
        .arg(server.kubeconfig())
        .arg("--authentication-kubeconfig")
        .arg(server.kubeconfig())
        .arg("--authentication-tolerate-lookup-failure=false")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("extension-apiserver-authentication")
            && stderr.contains("--authentication-tolerate-lookup-failure=false"),
        "{stderr}"
    );
}
