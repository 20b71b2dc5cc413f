//! kube-scheduler's TLS serving flags, turned into what rustls needs:
//!
//! * `--tls-min-version`: Go's names; rustls speaks TLS 1.2 and 1.3 only, so `VersionTLS10`
//!   and `VersionTLS11` are refused rather than silently raised;
//! * `--tls-cipher-suites`: Go's suite names mapped to rustls' (ring) TLS 1.2 suites; a name
//!   rustls does not implement (the CBC suites) or that Go calls insecure is an error that
//!   names it and lists the supported ones. TLS 1.3's suites are accepted and always on
//!   (Go ignores the list for TLS 1.3 too);
//! * `--tls-sni-cert-key`: `cert,key[:name,...]` pairs chosen by the name the client asks
//!   for ([`SniResolver`]);
//! * `--cert-dir`: where the self-signed pair is kept across restarts ([`cert_dir_pair`]).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::SupportedCipherSuite;
use rustls::crypto::ring::cipher_suite as suite;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use crate::serving::tls::ReloadingCert;
use crate::{Error, Result};

/// The lowest TLS version the secure port accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MinVersion {
    Tls12,
    Tls13,
}

/// Parses `--tls-min-version` (Go's `VersionTLS12`, `VersionTLS13`).
pub fn parse_min_version(s: &str) -> Result<MinVersion, String> {
    match s.trim() {
        "VersionTLS12" => Ok(MinVersion::Tls12),
        "VersionTLS13" => Ok(MinVersion::Tls13),
        v @ ("VersionTLS10" | "VersionTLS11") => Err(format!(
            "--tls-min-version {v}: ferrosched's TLS (rustls) supports TLS 1.2 and 1.3 only; use \
             VersionTLS12 or VersionTLS13 (or leave the flag out: TLS 1.2)"
        )),
        v => Err(format!(
            "--tls-min-version {v:?}: unknown version; use VersionTLS12 or VersionTLS13"
        )),
    }
}

/// Go's names of the TLS 1.2 suites rustls (ring) implements, and the rustls suite.
fn tls12_suites() -> [(&'static str, SupportedCipherSuite); 8] {
    [
        (
            "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
            suite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
        ),
        (
            "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
            suite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
        ),
        (
            "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305",
            suite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
        ),
        (
            "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
            suite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
        ),
        (
            "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
            suite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
        ),
        (
            "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
            suite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
        ),
        (
            "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305",
            suite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
        ),
        (
            "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
            suite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
        ),
    ]
}

/// TLS 1.3's suites: accepted, always enabled.
const TLS13_SUITES: &[&str] = &[
    "TLS_AES_128_GCM_SHA256",
    "TLS_AES_256_GCM_SHA384",
    "TLS_CHACHA20_POLY1305_SHA256",
];

/// Go's secure suites that rustls does not implement (CBC mode).
const NOT_IN_RUSTLS: &[&str] = &[
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
];

/// Go's insecure suites.
const INSECURE: &[&str] = &[
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256",
    "TLS_ECDHE_ECDSA_WITH_RC4_128_SHA",
    "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256",
    "TLS_ECDHE_RSA_WITH_RC4_128_SHA",
    "TLS_RSA_WITH_3DES_EDE_CBC_SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA256",
    "TLS_RSA_WITH_AES_128_GCM_SHA256",
    "TLS_RSA_WITH_AES_256_CBC_SHA",
    "TLS_RSA_WITH_AES_256_GCM_SHA384",
    "TLS_RSA_WITH_RC4_128_SHA",
];

/// The names `--tls-cipher-suites` accepts, for messages.
pub fn supported_cipher_suite_names() -> Vec<&'static str> {
    TLS13_SUITES
        .iter()
        .copied()
        .chain(tls12_suites().into_iter().map(|(n, _)| n))
        .collect()
}

/// Parses `--tls-cipher-suites` (Go's names): the TLS 1.2 suites to offer.
pub fn parse_cipher_suites(names: &[String]) -> Result<Vec<SupportedCipherSuite>, String> {
    let mut out = Vec::new();
    for name in names.iter().map(|n| n.trim()).filter(|n| !n.is_empty()) {
        if let Some((_, s)) = tls12_suites().into_iter().find(|(n, _)| *n == name) {
            if !out.contains(&s) {
                out.push(s);
            }
            continue;
        }
        if TLS13_SUITES.contains(&name) {
            continue;
        }
        let why = if NOT_IN_RUSTLS.contains(&name) {
            "not implemented by ferrosched's TLS (rustls has no CBC suites)"
        } else if INSECURE.contains(&name) {
            "insecure (Go lists it as such) and not implemented by rustls"
        } else {
            "not a cipher suite name Go knows"
        };
        return Err(format!(
            "--tls-cipher-suites: {name} is {why}; supported: {}",
            supported_cipher_suite_names().join(", ")
        ));
    }
    Ok(out)
}

/// One `--tls-sni-cert-key` value: certificate file, key file, and the names it serves
/// (empty: the names in the certificate).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SniCertKey {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub names: Vec<String>,
}

/// Parses `cert,key` or `cert,key:name,name` as upstream's `--tls-sni-cert-key`.
pub fn parse_sni_cert_key(value: &str) -> Result<SniCertKey, String> {
    let (files, names) = match value.split_once(':') {
        Some((f, n)) => (f, n),
        None => (value, ""),
    };
    let bad = || {
        format!(
            "--tls-sni-cert-key {value:?}: expected CERTFILE,KEYFILE or \
             CERTFILE,KEYFILE:NAME,NAME (e.g. foo.crt,foo.key:*.foo.com,foo.com)"
        )
    };
    let mut parts = files.split(',').map(str::trim);
    let (Some(cert), Some(key), None) = (parts.next(), parts.next(), parts.next()) else {
        return Err(bad());
    };
    if cert.is_empty() || key.is_empty() {
        return Err(bad());
    }
    Ok(SniCertKey {
        cert: cert.into(),
        key: key.into(),
        names: names
            .split(',')
            .map(|n| n.trim().to_ascii_lowercase())
            .filter(|n| !n.is_empty())
            .collect(),
    })
}

/// Chooses the serving pair by the client's SNI name, as apiserver does: an exact name
/// first, then a `*.` pattern for its parent domain, else the default pair. Names given
/// on the flag win over names read from certificates; among equals, the earlier flag wins.
pub struct SniResolver {
    default: Arc<dyn ResolvesServerCert>,
    by_name: HashMap<String, Arc<ReloadingCert>>,
}

impl std::fmt::Debug for SniResolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SniResolver")
            .field("names", &self.by_name.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl SniResolver {
    /// Loads every pair now (a bad file is an error naming the flag).
    pub fn new(default: Arc<dyn ResolvesServerCert>, pairs: &[SniCertKey]) -> Result<Self> {
        let mut loaded = Vec::new();
        for p in pairs {
            let cert = ReloadingCert::new(&p.cert, &p.key)
                .map_err(|e| Error::Certificate(format!("--tls-sni-cert-key: {e}")))?;
            loaded.push((p, Arc::new(cert)));
        }
        let mut by_name = HashMap::new();
        for (p, cert) in &loaded {
            for n in &p.names {
                by_name.entry(n.clone()).or_insert_with(|| Arc::clone(cert));
            }
        }
        for (p, cert) in &loaded {
            if !p.names.is_empty() {
                continue;
            }
            let leaf = cert.current().cert[0].clone();
            for n in crate::serving::x509::serving_names(&leaf) {
                by_name
                    .entry(n.to_ascii_lowercase())
                    .or_insert_with(|| Arc::clone(cert));
            }
        }
        Ok(SniResolver { default, by_name })
    }
}

impl ResolvesServerCert for SniResolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        if let Some(name) = hello.server_name().map(str::to_ascii_lowercase) {
            if let Some(c) = self.by_name.get(&name) {
                return Some(c.current());
            }
            if let Some((_, parent)) = name.split_once('.')
                && let Some(c) = self.by_name.get(&format!("*.{parent}"))
            {
                return Some(c.current());
            }
        }
        self.default.resolve(hello)
    }
}

/// The pair file names upstream uses for kube-scheduler in `--cert-dir`.
pub const CERT_DIR_PAIR: (&str, &str) = ("kube-scheduler.crt", "kube-scheduler.key");

/// `--cert-dir` without `--tls-cert-file`: the pair in `dir`, made (self-signed for
/// `hosts`) and written on first start, reused on later ones, as kube-scheduler does. The
/// key is written readable by the owner only.
pub fn cert_dir_pair(dir: &Path, hosts: &[String]) -> Result<(PathBuf, PathBuf)> {
    let cert = dir.join(CERT_DIR_PAIR.0);
    let key = dir.join(CERT_DIR_PAIR.1);
    if std::fs::read(&cert).is_ok() && std::fs::read(&key).is_ok() {
        return Ok((cert, key));
    }
    let bad = |what: &Path, e: std::io::Error| {
        Error::Certificate(format!("--cert-dir: writing {}: {e}", what.display()))
    };
    std::fs::create_dir_all(dir).map_err(|e| bad(dir, e))?;
    let (cert_pem, key_pem) = crate::serving::tls::self_signed_pem(hosts)?;
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
    std::io::Write::write_all(
        &mut opts.open(&key).map_err(|e| bad(&key, e))?,
        key_pem.as_bytes(),
    )
    .map_err(|e| bad(&key, e))?;
    std::fs::write(&cert, cert_pem).map_err(|e| bad(&cert, e))?;
    tracing::info!(cert = %cert.display(), key = %key.display(), "generated a self-signed serving certificate");
    Ok((cert, key))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn min_versions_below_tls12_are_refused_with_the_fix() {
        assert_eq!(parse_min_version("VersionTLS12"), Ok(MinVersion::Tls12));
        assert_eq!(parse_min_version("VersionTLS13"), Ok(MinVersion::Tls13));
        let e = parse_min_version("VersionTLS10").unwrap_err();
        assert!(
            e.contains("TLS 1.2 and 1.3 only") && e.contains("use VersionTLS12"),
            "{e}"
        );
        assert!(
            parse_min_version("tls12")
                .unwrap_err()
                .contains("unknown version")
        );
    }

    #[test]
    fn go_suite_names_map_to_rustls_and_bad_ones_are_named() {
        let got = parse_cipher_suites(&[
            "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256".into(),
            "TLS_AES_128_GCM_SHA256".into(),
            "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305".into(),
        ])
        .unwrap();
        assert_eq!(
            got,
            [
                suite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
                suite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256
            ]
        );
        let e = parse_cipher_suites(&["TLS_RSA_WITH_RC4_128_SHA".into()]).unwrap_err();
        assert!(
            e.starts_with("--tls-cipher-suites: TLS_RSA_WITH_RC4_128_SHA is insecure"),
            "{e}"
        );
        assert!(e.contains("supported: TLS_AES_128_GCM_SHA256, "), "{e}");
        let e = parse_cipher_suites(&["TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA".into()]).unwrap_err();
        assert!(e.contains("rustls has no CBC suites"), "{e}");
        let e = parse_cipher_suites(&["NOPE".into()]).unwrap_err();
        assert!(e.contains("NOPE is not a cipher suite name"), "{e}");
    }

    #[test]
    fn only_tls13_suite_names_leave_tls13_served() {
        // Go's TLS 1.3 names select nothing for TLS 1.2; the config still builds.
        let suites = parse_cipher_suites(&["TLS_AES_256_GCM_SHA384".into()]).unwrap();
        assert!(suites.is_empty());
        let cert = crate::serving::tls::self_signed(&["localhost".into()]).unwrap();
        let cfg = crate::serving::tls::secure_port_config(
            Arc::new(cert),
            &crate::serving::tls::TlsOptions {
                min_version: None,
                cipher_suites: Some(suites),
            },
        );
        assert!(cfg.is_ok());
    }

    #[test]
    fn sni_values_parse_as_upstreams() {
        assert_eq!(
            parse_sni_cert_key("a.crt,a.key:*.Foo.com, foo.com").unwrap(),
            SniCertKey {
                cert: "a.crt".into(),
                key: "a.key".into(),
                names: vec!["*.foo.com".into(), "foo.com".into()]
            }
        );
        assert!(parse_sni_cert_key("a.crt,a.key").unwrap().names.is_empty());
        assert!(
            parse_sni_cert_key("a.crt")
                .unwrap_err()
                .contains("CERTFILE,KEYFILE")
        );
        assert!(parse_sni_cert_key("a,b,c").is_err());
    }
}
