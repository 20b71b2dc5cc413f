//! Client certificates on the secure port: CA bundles that verify a presented chain
//! ([`CaBundle`], webpki through rustls, client-auth usage required as Go's
//! `x509.Verify` with `ExtKeyUsageClientAuth`), and the few fields kube-scheduler reads
//! from a certificate: the subject's CommonName and Organizations (user and groups, as
//! apiserver's `CommonNameUserConversion`) and the names a serving certificate is for
//! (`--tls-sni-cert-key` without explicit names). A small DER reader does the latter: no
//! X.509 parsing crate is needed for three fields.

use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::danger::ClientCertVerifier;

/// A bundle of PEM CA certificates that client certificate chains are verified against.
#[derive(Clone)]
pub struct CaBundle {
    /// Where it came from (a file, a ConfigMap key), for messages.
    pub source: String,
    verifier: Arc<dyn ClientCertVerifier>,
}

impl std::fmt::Debug for CaBundle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CaBundle")
            .field("source", &self.source)
            .finish()
    }
}

impl CaBundle {
    /// Parses `pem` (one or more CERTIFICATE blocks); an error names `source`.
    pub fn from_pem(pem: &[u8], source: impl Into<String>) -> Result<Self, String> {
        let source = source.into();
        let bad = |e: &dyn std::fmt::Display| format!("{source}: {e}");
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_slice_iter(pem) {
            roots.add(c.map_err(|e| bad(&e))?).map_err(|e| bad(&e))?;
        }
        if roots.is_empty() {
            return Err(bad(&"no PEM certificate"));
        }
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
            Arc::new(roots),
            crate::serving::tls::provider(),
        )
        .build()
        .map_err(|e| bad(&e))?;
        Ok(CaBundle { source, verifier })
    }

    /// Reads and parses the PEM file at `path`.
    pub fn from_file(path: &std::path::Path) -> Result<Self, String> {
        let pem = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
        Self::from_pem(&pem, path.display().to_string())
    }

    /// Verifies `leaf` (with `intermediates`) against the bundle now: signed by one of its
    /// CAs, within its validity, usable for client authentication.
    pub fn verify(
        &self,
        leaf: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
    ) -> Result<(), String> {
        self.verifier
            .verify_client_cert(leaf, intermediates, UnixTime::now())
            .map(|_| ())
            .map_err(|e| format!("verifying certificate against {}: {e}", self.source))
    }
}

/// The subject fields kube-scheduler maps to a user.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Subject {
    /// The CommonName (the user name); empty when the certificate has none.
    pub common_name: String,
    /// The Organizations, in order (the groups).
    pub organizations: Vec<String>,
}

const OID_COMMON_NAME: &[u8] = &[0x55, 0x04, 0x03];
const OID_ORGANIZATION: &[u8] = &[0x55, 0x04, 0x0a];
const OID_SUBJECT_ALT_NAME: &[u8] = &[0x55, 0x1d, 0x11];

/// One DER element: tag, contents, and what follows it.
fn element(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n]
            .iter()
            .fold(0usize, |acc, b| (acc << 8) | usize::from(*b));
        (len, &rest[n..])
    };
    (rest.len() >= len).then(|| (tag, &rest[..len], &rest[len..]))
}

/// The elements of a SEQUENCE's or SET's contents.
fn elements(mut input: &[u8]) -> impl Iterator<Item = (u8, &[u8])> {
    std::iter::from_fn(move || {
        let (tag, body, rest) = element(input)?;
        input = rest;
        Some((tag, body))
    })
}

/// A directory string (UTF8String, PrintableString, IA5String, T61String, BMPString).
fn text(tag: u8, body: &[u8]) -> String {
    match tag {
        // BMPString: UTF-16 big endian.
        0x1e => char::decode_utf16(
            body.chunks(2)
                .map(|c| u16::from_be_bytes([c[0], c.get(1).copied().unwrap_or_default()])),
        )
        .map(|c| c.unwrap_or(char::REPLACEMENT_CHARACTER))
        .collect(),
        _ => String::from_utf8_lossy(body).into_owned(),
    }
}

/// The TBSCertificate's fields from the subject on: subject, subjectPublicKeyInfo, then the
/// optional unique ids and extensions.
fn after_issuer(der: &[u8]) -> Option<Vec<(u8, &[u8])>> {
    let (_, cert, _) = element(der)?;
    let (_, tbs, _) = element(cert)?;
    let mut fields: Vec<(u8, &[u8])> = elements(tbs).collect();
    if fields.first()?.0 == 0xa0 {
        fields.remove(0); // version
    }
    // serialNumber, signature, issuer, validity
    (fields.len() > 4).then(|| fields.split_off(4))
}

/// The certificate's subject CommonName and Organizations; `None` when `der` is not a
/// certificate this reader understands.
pub fn subject(der: &[u8]) -> Option<Subject> {
    let fields = after_issuer(der)?;
    let (tag, name) = *fields.first()?;
    if tag != 0x30 {
        return None;
    }
    let mut subject = Subject::default();
    for (_, rdn) in elements(name) {
        for (_, attr) in elements(rdn) {
            let mut parts = elements(attr);
            let (Some((0x06, oid)), Some((vtag, value))) = (parts.next(), parts.next()) else {
                continue;
            };
            if oid == OID_COMMON_NAME {
                subject.common_name = text(vtag, value);
            } else if oid == OID_ORGANIZATION {
                subject.organizations.push(text(vtag, value));
            }
        }
    }
    Some(subject)
}

/// The names a serving certificate is for: its subjectAltName DNS names and IP addresses,
/// and its CommonName when it has no DNS name (as apiserver extracts them for SNI).
pub fn serving_names(der: &[u8]) -> Vec<String> {
    let Some(fields) = after_issuer(der) else {
        return Vec::new();
    };
    let mut dns = Vec::new();
    let mut ips = Vec::new();
    for &(tag, body) in &fields {
        if tag != 0xa3 {
            continue;
        }
        let Some((_, exts, _)) = element(body) else {
            continue;
        };
        for (_, ext) in elements(exts) {
            let parts: Vec<_> = elements(ext).collect();
            let (Some((0x06, oid)), Some(&(0x04, value))) = (parts.first().copied(), parts.last())
            else {
                continue;
            };
            if oid != OID_SUBJECT_ALT_NAME {
                continue;
            }
            let Some((_, names, _)) = element(value) else {
                continue;
            };
            for (tag, v) in elements(names) {
                match tag {
                    0x82 => dns.push(String::from_utf8_lossy(v).into_owned()),
                    0x87 => match v.len() {
                        4 => ips.push(
                            std::net::Ipv4Addr::from(<[u8; 4]>::try_from(v).unwrap()).to_string(),
                        ),
                        16 => ips.push(
                            std::net::Ipv6Addr::from(<[u8; 16]>::try_from(v).unwrap()).to_string(),
                        ),
                        _ => {}
                    },
                    _ => {}
                }
            }
        }
    }
    if dns.is_empty()
        && let Some(s) = subject(der)
        && !s.common_name.is_empty()
    {
        dns.push(s.common_name);
    }
    dns.extend(ips);
    dns
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{CertificateParams, DnType, KeyPair};

    #[test]
    fn subject_and_names_are_read_from_a_real_certificate() {
        let mut p = CertificateParams::new(vec!["a.example".into(), "10.0.0.7".into()]).unwrap();
        p.distinguished_name.push(DnType::CommonName, "alice");
        p.distinguished_name
            .push(DnType::OrganizationName, "team-a");
        let cert = p.self_signed(&KeyPair::generate().unwrap()).unwrap();
        let s = subject(cert.der()).unwrap();
        assert_eq!(s.common_name, "alice");
        assert_eq!(s.organizations, ["team-a"]);
        assert_eq!(serving_names(cert.der()), ["a.example", "10.0.0.7"]);
    }

    #[test]
    fn a_certificate_without_dns_names_is_for_its_common_name() {
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.distinguished_name
            .push(DnType::CommonName, "only-cn.example");
        let cert = p.self_signed(&KeyPair::generate().unwrap()).unwrap();
        assert_eq!(serving_names(cert.der()), ["only-cn.example"]);
        assert_eq!(
            subject(cert.der()).unwrap().organizations,
            Vec::<String>::new()
        );
    }

    #[test]
    fn garbage_is_not_a_subject() {
        assert_eq!(subject(b"\x30\x03\x02\x01"), None);
        assert_eq!(subject(&[]), None);
        assert!(serving_names(b"nonsense").is_empty());
    }

    #[test]
    fn a_ca_bundle_without_certificates_is_an_error_naming_its_source() {
        let e = CaBundle::from_pem(b"not pem", "--client-ca-file /x").unwrap_err();
        assert!(e.starts_with("--client-ca-file /x: "), "{e}");
    }
}
