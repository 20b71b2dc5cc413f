//! Delegated authentication and authorization for the secure port, as kube-scheduler does
//! it (apiserver's `DelegatingAuthenticationOptions`/`DelegatingAuthorizationOptions`):
//! a bearer token is checked with a TokenReview, the user then needs a SubjectAccessReview
//! allowing the request's verb on its non-resource path (`get /metrics`). No token: the
//! request is `system:anonymous` (anonymous auth is on, as upstream), so it reaches
//! always-allowed paths (`--authorization-always-allow-paths`, default `/healthz`,
//! `/readyz`, `/livez`: the kubelet's probes carry no token) and is refused (403) elsewhere
//! unless RBAC lets anonymous users in. A token the API server rejects is 401 on every
//! path. Review results are cached for 10 s, allowed and denied alike (upstream's
//! defaults), so a scrape every few seconds costs at most one review pair per 10 s.
//!
//! Before the token, as upstream's union of authenticators, a client certificate is tried
//! (the TLS server asks every client for one and accepts any, [`crate::serving::tls`]; it
//! is verified here): first as the front proxy's ([`RequestHeaderConfig`]: verified
//! against `--requestheader-client-ca-file`, its CommonName in
//! `--requestheader-allowed-names` when that is set; then the user is the one the
//! `X-Remote-User`-style headers name), then against `--client-ca-file` (user = the
//! certificate's CommonName, groups = its Organizations). Without those flags both CAs come
//! from the `kube-system/extension-apiserver-authentication` ConfigMap, read at start
//! ([`lookup_in_cluster`]) and re-read every 10 s ([`DelegatedAuth::reload_from_cluster`]),
//! so a rotated CA is picked up without a restart. The first method that succeeds wins; when none does and one of
//! them failed (a certificate no CA signed, a rejected token) the request is 401, when none
//! applied it is anonymous. Authenticated users are in `system:authenticated`.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::PostParams;
use kube::{Api, Client};
use tokio::time::Instant;

use crate::serving::tls::PeerCertificate;
use crate::serving::x509::{self, CaBundle};

/// Upstream's default authentication cache TTL (successes and failures).
pub const AUTHN_CACHE_TTL: Duration = Duration::from_secs(10);
/// Upstream's default authorization cache TTLs (kube-scheduler: allowed and denied 10 s).
pub const AUTHZ_CACHE_TTL: Duration = Duration::from_secs(10);
/// Bound on one review request.
const REVIEW_TIMEOUT: Duration = Duration::from_secs(10);
/// kube-scheduler's `--authorization-always-allow-paths` default.
pub const DEFAULT_ALWAYS_ALLOW_PATHS: [&str; 3] = ["/healthz", "/readyz", "/livez"];

const ANONYMOUS: &str = "system:anonymous";
const UNAUTHENTICATED: &str = "system:unauthenticated";
const AUTHENTICATED: &str = "system:authenticated";
/// Upstream's `AlwaysAllowGroups` default: the API server's own authorizer lets
/// `system:masters` do anything, so no SubjectAccessReview is sent for them.
pub const ALWAYS_ALLOW_GROUPS: [&str; 1] = ["system:masters"];

/// Upstream's `--requestheader-username-headers` default.
pub const DEFAULT_USERNAME_HEADERS: [&str; 1] = ["X-Remote-User"];
/// Upstream's `--requestheader-group-headers` default.
pub const DEFAULT_GROUP_HEADERS: [&str; 1] = ["X-Remote-Group"];
/// Upstream's `--requestheader-extra-headers-prefix` default.
pub const DEFAULT_EXTRA_HEADERS_PREFIXES: [&str; 1] = ["X-Remote-Extra-"];

/// Where the API server publishes its client CAs for delegated authentication.
pub const AUTHENTICATION_CONFIGMAP_NAMESPACE: &str = "kube-system";
/// See [`AUTHENTICATION_CONFIGMAP_NAMESPACE`].
pub const AUTHENTICATION_CONFIGMAP_NAME: &str = "extension-apiserver-authentication";

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct User {
    name: String,
    uid: String,
    groups: Vec<String>,
    extra: BTreeMap<String, Vec<String>>,
}

/// Front-proxy authentication (`--requestheader-*`, or the ConfigMap's
/// `requestheader-*` keys): a request whose client certificate `ca` verifies (and whose
/// CommonName is in `allowed_names`, when that is not empty) is the user its headers name.
#[derive(Clone, Debug)]
pub struct RequestHeaderConfig {
    pub ca: CaBundle,
    pub allowed_names: Vec<String>,
    pub username_headers: Vec<String>,
    /// `--requestheader-uid-headers` (kube 1.32+; upstream's default is none): the user's
    /// UID, passed on in SubjectAccessReviews.
    pub uid_headers: Vec<String>,
    pub group_headers: Vec<String>,
    pub extra_headers_prefixes: Vec<String>,
}

impl RequestHeaderConfig {
    /// `ca` with upstream's default header names and no allowed-names restriction.
    pub fn with_defaults(ca: CaBundle) -> Self {
        RequestHeaderConfig {
            ca,
            allowed_names: Vec::new(),
            username_headers: DEFAULT_USERNAME_HEADERS.map(String::from).to_vec(),
            uid_headers: Vec::new(),
            group_headers: DEFAULT_GROUP_HEADERS.map(String::from).to_vec(),
            extra_headers_prefixes: DEFAULT_EXTRA_HEADERS_PREFIXES.map(String::from).to_vec(),
        }
    }

    /// `Ok(None)`: no certificate, or no user header; `Err`: a certificate that is not the
    /// front proxy's.
    fn authenticate(
        &self,
        peer: &PeerCertificate,
        headers: &axum::http::HeaderMap,
    ) -> Result<Option<User>, String> {
        let Some(leaf) = &peer.0 else {
            return Ok(None);
        };
        self.ca.verify(leaf, &peer.1)?;
        if !self.allowed_names.is_empty() {
            let cn = x509::subject(leaf).unwrap_or_default().common_name;
            if !self.allowed_names.contains(&cn) {
                return Err(format!(
                    "client certificate with CommonName {cn:?} is not in --requestheader-allowed-names"
                ));
            }
        }
        let values = |name: &str| {
            headers
                .get_all(name.trim())
                .into_iter()
                .filter_map(|v| v.to_str().ok())
                .filter(|v| !v.is_empty())
                .map(String::from)
                .collect::<Vec<_>>()
        };
        let Some(name) = self
            .username_headers
            .iter()
            .filter(|h| !h.trim().is_empty())
            .find_map(|h| values(h).into_iter().next())
        else {
            return Ok(None);
        };
        let uid = self
            .uid_headers
            .iter()
            .filter(|h| !h.trim().is_empty())
            .find_map(|h| values(h).into_iter().next())
            .unwrap_or_default();
        let groups = self
            .group_headers
            .iter()
            .filter(|h| !h.trim().is_empty())
            .flat_map(|h| values(h))
            .collect();
        let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for prefix in &self.extra_headers_prefixes {
            let prefix = prefix.trim().to_ascii_lowercase();
            if prefix.is_empty() {
                continue;
            }
            for (header, value) in headers {
                let Some(key) = header.as_str().strip_prefix(prefix.as_str()) else {
                    continue;
                };
                let Ok(value) = value.to_str() else { continue };
                if !value.is_empty() {
                    extra
                        .entry(percent_decode(key).to_ascii_lowercase())
                        .or_default()
                        .push(value.to_string());
                }
            }
        }
        Ok(Some(User {
            name,
            uid,
            groups,
            extra,
        }))
    }
}

/// `%XX` escapes decoded (header names cannot carry every character an extra key may
/// have; upstream unescapes them the same way); a malformed escape is kept as is.
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%'
            && i + 2 < b.len()
            && let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2]))
        {
            out.push((h * 16 + l) as u8);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `--client-ca-file` (or the ConfigMap's `client-ca-file`): a certificate `ca` verifies is
/// the user named by its CommonName, in the groups of its Organizations.
fn authenticate_client_cert(ca: &CaBundle, peer: &PeerCertificate) -> Result<Option<User>, String> {
    let Some(leaf) = &peer.0 else {
        return Ok(None);
    };
    ca.verify(leaf, &peer.1)?;
    let subject = x509::subject(leaf).ok_or("client certificate: unreadable subject")?;
    if subject.common_name.is_empty() {
        return Err("client certificate: the CommonName (user name) is empty".into());
    }
    Ok(Some(User {
        name: subject.common_name,
        uid: String::new(),
        groups: subject.organizations,
        extra: BTreeMap::new(),
    }))
}

/// What the ConfigMap `kube-system/extension-apiserver-authentication` says (the API
/// server writes it): the client CA and the front proxy's settings, each `None` when absent.
#[derive(Clone, Debug, Default)]
pub struct ClusterAuthentication {
    pub client_ca: Option<CaBundle>,
    pub request_header: Option<RequestHeaderConfig>,
    /// The ConfigMap's resourceVersion (`None` when it does not exist), so a reload can
    /// tell a change.
    pub resource_version: Option<String>,
}

/// Reads the ConfigMap (at start, and again by [`DelegatedAuth::reload_from_cluster`]).
/// Not there: nothing configured
/// (`Ok` with both `None`). Forbidden or unreachable: `Err` (the caller decides with
/// `--authentication-tolerate-lookup-failure`).
pub async fn lookup_in_cluster(client: &Client) -> Result<ClusterAuthentication, String> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), AUTHENTICATION_CONFIGMAP_NAMESPACE);
    let what = format!(
        "configmap/{AUTHENTICATION_CONFIGMAP_NAME} in {AUTHENTICATION_CONFIGMAP_NAMESPACE}"
    );
    let cm = tokio::time::timeout(REVIEW_TIMEOUT, api.get_opt(AUTHENTICATION_CONFIGMAP_NAME))
        .await
        .map_err(|_| format!("reading {what}: timed out"))?
        .map_err(|e| match &e {
            kube::Error::Api(s) if s.code == 403 => format!(
                "reading {what}: {e} (usually fixed by binding the Role \
                 extension-apiserver-authentication-reader in kube-system to the scheduler's \
                 service account)"
            ),
            _ => format!("reading {what}: {e}"),
        })?;
    let Some(cm) = cm else {
        return Ok(ClusterAuthentication::default());
    };
    let resource_version = cm.metadata.resource_version.clone();
    let data = cm.data.unwrap_or_default();
    let key = |k: &str| data.get(k).filter(|v| !v.trim().is_empty());
    let list = |k: &str| -> Result<Vec<String>, String> {
        match key(k) {
            None => Ok(Vec::new()),
            Some(v) => serde_json::from_str(v)
                .map_err(|e| format!("{what}: key {k} is not a JSON list of strings: {e}")),
        }
    };
    let client_ca = key("client-ca-file")
        .map(|pem| CaBundle::from_pem(pem.as_bytes(), format!("{what} key client-ca-file")))
        .transpose()?;
    let request_header = match key("requestheader-client-ca-file") {
        None => None,
        Some(pem) => Some(RequestHeaderConfig {
            ca: CaBundle::from_pem(
                pem.as_bytes(),
                format!("{what} key requestheader-client-ca-file"),
            )?,
            allowed_names: list("requestheader-allowed-names")?,
            username_headers: list("requestheader-username-headers")?,
            uid_headers: list("requestheader-uid-headers")?,
            group_headers: list("requestheader-group-headers")?,
            extra_headers_prefixes: list("requestheader-extra-headers-prefix")?,
        }),
    };
    Ok(ClusterAuthentication {
        client_ca,
        request_header,
        resource_version,
    })
}

/// How often [`DelegatedAuth::reload_from_cluster`] re-reads the ConfigMap in `run`.
pub const CONFIGMAP_RELOAD_PERIOD: Duration = Duration::from_secs(10);

/// Which of the ConfigMap's settings the flags gave (those are never reloaded).
#[derive(Clone, Copy, Debug, Default)]
pub struct FixedByFlags {
    pub client_ca: bool,
    pub request_header: bool,
}

/// The certificate authenticators in force.
#[derive(Clone, Default)]
struct Certs {
    client_ca: Option<Arc<CaBundle>>,
    request_header: Option<Arc<RequestHeaderConfig>>,
}

fn read<T>(l: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(|e| e.into_inner())
}

fn write<T>(l: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(|e| e.into_inner())
}

/// An authorization question: user, verb, path.
type Decision = (User, String, String);

/// The authenticator and authorizer the health server asks.
pub struct DelegatedAuth {
    /// TokenReviews go here; `None` (no kubeconfig, not in a cluster): tokens are not
    /// checked, every request is anonymous (upstream does the same).
    authn: Option<Client>,
    /// SubjectAccessReviews go here; `None`: only always-allowed paths are served.
    authz: Option<Client>,
    always_allow: Vec<String>,
    /// Verifies client certificates (`--client-ca-file`) and authenticates the front
    /// proxy; replaced when the ConfigMap they came from changes.
    certs: RwLock<Certs>,
    tokens: Mutex<HashMap<String, (Instant, Option<User>)>>,
    decisions: Mutex<HashMap<Decision, (Instant, bool)>>,
}

impl DelegatedAuth {
    /// `always_allow`: paths served without authorization; a trailing `*` matches a prefix
    /// (as upstream).
    pub fn new(authn: Option<Client>, authz: Option<Client>, always_allow: Vec<String>) -> Self {
        DelegatedAuth {
            authn,
            authz,
            always_allow,
            certs: RwLock::new(Certs::default()),
            tokens: Mutex::new(HashMap::new()),
            decisions: Mutex::new(HashMap::new()),
        }
    }

    /// Also authenticates client certificates signed by `ca`.
    pub fn with_client_ca(self, ca: Option<CaBundle>) -> Self {
        write(&self.certs).client_ca = ca.map(Arc::new);
        self
    }

    /// Also authenticates requests from the front proxy.
    pub fn with_request_header(self, config: Option<RequestHeaderConfig>) -> Self {
        write(&self.certs).request_header = config.map(Arc::new);
        self
    }

    /// Re-reads the CA files of `--client-ca-file` (`client_ca`) and
    /// `--requestheader-client-ca-file` (`request_header_ca`) every `period`, as upstream's
    /// dynamic file CA content: a changed file's bundle replaces the one in force (the
    /// front proxy keeps its other flags). A file that cannot be read or parsed keeps the
    /// last bundle (a warning once per content).
    pub fn reload_ca_files(
        self: &Arc<Self>,
        client_ca: Option<std::path::PathBuf>,
        request_header_ca: Option<std::path::PathBuf>,
        period: Duration,
    ) -> tokio::task::JoinHandle<()> {
        let auth = Arc::clone(self);
        let read_now =
            |p: &Option<std::path::PathBuf>| p.as_ref().and_then(|p| std::fs::read(p).ok());
        let mut last = [read_now(&client_ca), read_now(&request_header_ca)];
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(period).await;
                for (i, path) in [&client_ca, &request_header_ca].into_iter().enumerate() {
                    let Some(path) = path else { continue };
                    let Ok(pem) = std::fs::read(path) else {
                        // Gone for a moment (a Secret volume's symlink swap): try again later.
                        continue;
                    };
                    if last[i].as_ref() == Some(&pem) {
                        continue;
                    }
                    last[i] = Some(pem.clone());
                    let bundle = match CaBundle::from_pem(&pem, path.display().to_string()) {
                        Ok(b) => b,
                        Err(e) => {
                            tracing::warn!(error = %e, "changed CA file not usable; keeping the last bundle");
                            continue;
                        }
                    };
                    let mut certs = write(&auth.certs);
                    if i == 0 {
                        certs.client_ca = Some(Arc::new(bundle));
                    } else if let Some(rh) = &certs.request_header {
                        certs.request_header = Some(Arc::new(RequestHeaderConfig {
                            ca: bundle,
                            ..RequestHeaderConfig::clone(rh)
                        }));
                    }
                    tracing::info!(file = %path.display(), "CA file reloaded");
                }
            }
        })
    }

    /// Re-reads the extension-apiserver-authentication ConfigMap through `client` every
    /// `period` (upstream watches it), so a CA rotation or a new front-proxy setting takes
    /// effect without a restart. Only what the flags did not set is replaced (`fixed`);
    /// a ConfigMap that was deleted takes its settings away; a failed read keeps the last
    /// ones (a warning when the failure starts, an info line when it ends).
    pub fn reload_from_cluster(
        self: &Arc<Self>,
        client: Client,
        period: Duration,
        fixed: FixedByFlags,
        mut last_version: Option<String>,
    ) -> tokio::task::JoinHandle<()> {
        let auth = Arc::clone(self);
        tokio::spawn(async move {
            let mut failing = false;
            loop {
                tokio::time::sleep(period).await;
                match lookup_in_cluster(&client).await {
                    Ok(found) => {
                        if failing {
                            tracing::info!(
                                "the in-cluster authentication configuration can be read again"
                            );
                            failing = false;
                        }
                        if found.resource_version == last_version {
                            continue;
                        }
                        last_version = found.resource_version.clone();
                        let mut certs = write(&auth.certs);
                        if !fixed.client_ca {
                            certs.client_ca = found.client_ca.map(Arc::new);
                        }
                        if !fixed.request_header {
                            certs.request_header = found.request_header.map(Arc::new);
                        }
                        tracing::info!(
                            resource_version = last_version.as_deref().unwrap_or("(deleted)"),
                            client_ca = certs.client_ca.is_some(),
                            request_header = certs.request_header.is_some(),
                            "reloaded configmap/{AUTHENTICATION_CONFIGMAP_NAME} in {AUTHENTICATION_CONFIGMAP_NAMESPACE}"
                        );
                    }
                    Err(e) => {
                        if !failing {
                            tracing::warn!(error = %e, "cannot reload the in-cluster authentication configuration; keeping the last one");
                            failing = true;
                        }
                    }
                }
            }
        })
    }

    fn always_allowed(&self, path: &str) -> bool {
        self.always_allow.iter().any(|p| match p.strip_suffix('*') {
            Some(prefix) => path.starts_with(prefix),
            None => p == path,
        })
    }

    /// `Ok(None)`: the token is not valid; `Err`: the API server could not be asked.
    async fn authenticate(&self, token: &str) -> Result<Option<User>, String> {
        let Some(client) = &self.authn else {
            return Ok(Some(anonymous()));
        };
        let now = Instant::now();
        if let Some((at, user)) = lock(&self.tokens).get(token)
            && now.duration_since(*at) < AUTHN_CACHE_TTL
        {
            return Ok(user.clone());
        }
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: token.to_string(),
                ..Default::default()
            },
            ..Default::default()
        };
        let api: Api<TokenReview> = Api::all(client.clone());
        let answer =
            tokio::time::timeout(REVIEW_TIMEOUT, api.create(&PostParams::default(), &review))
                .await
                .map_err(|_| "TokenReview timed out".to_string())?
                .map_err(|e| format!("TokenReview failed: {e}"))?;
        let user = answer
            .status
            .filter(|s| s.authenticated == Some(true))
            .and_then(|s| s.user)
            .map(|u| User {
                name: u.username.unwrap_or_default(),
                uid: u.uid.unwrap_or_default(),
                groups: u.groups.unwrap_or_default(),
                extra: u.extra.unwrap_or_default().into_iter().collect(),
            });
        let mut cache = lock(&self.tokens);
        cache.retain(|_, (at, _)| now.duration_since(*at) < AUTHN_CACHE_TTL);
        cache.insert(token.to_string(), (now, user.clone()));
        Ok(user)
    }

    async fn authorize(&self, user: &User, verb: &str, path: &str) -> Result<bool, String> {
        let Some(client) = &self.authz else {
            return Ok(false);
        };
        let key = (user.clone(), verb.to_string(), path.to_string());
        let now = Instant::now();
        if let Some((at, allowed)) = lock(&self.decisions).get(&key)
            && now.duration_since(*at) < AUTHZ_CACHE_TTL
        {
            return Ok(*allowed);
        }
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(user.name.clone()),
                uid: (!user.uid.is_empty()).then(|| user.uid.clone()),
                groups: Some(user.groups.clone()),
                extra: (!user.extra.is_empty()).then(|| user.extra.clone().into_iter().collect()),
                non_resource_attributes: Some(NonResourceAttributes {
                    path: Some(path.to_string()),
                    verb: Some(verb.to_string()),
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        let api: Api<SubjectAccessReview> = Api::all(client.clone());
        let answer =
            tokio::time::timeout(REVIEW_TIMEOUT, api.create(&PostParams::default(), &review))
                .await
                .map_err(|_| "SubjectAccessReview timed out".to_string())?
                .map_err(|e| format!("SubjectAccessReview failed: {e}"))?;
        let allowed = answer
            .status
            .is_some_and(|s| s.allowed && s.denied != Some(true));
        let mut cache = lock(&self.decisions);
        cache.retain(|_, (at, _)| now.duration_since(*at) < AUTHZ_CACHE_TTL);
        cache.insert(key, (now, allowed));
        Ok(allowed)
    }
}

impl DelegatedAuth {
    /// Upstream's order: front proxy, client certificate, bearer token; the first that
    /// succeeds wins. None: anonymous, unless one of them failed (`Err`, a 401).
    async fn authenticate_request(
        &self,
        peer: &PeerCertificate,
        headers: &axum::http::HeaderMap,
    ) -> Result<User, String> {
        let mut errors = Vec::new();
        let certs = read(&self.certs).clone();
        if let Some(rh) = &certs.request_header {
            match rh.authenticate(peer, headers) {
                Ok(Some(user)) => return Ok(authenticated(user)),
                Ok(None) => {}
                Err(e) => errors.push(e),
            }
        }
        if let Some(ca) = &certs.client_ca {
            match authenticate_client_cert(ca, peer) {
                Ok(Some(user)) => return Ok(authenticated(user)),
                Ok(None) => {}
                Err(e) => errors.push(e),
            }
        }
        if let Some(token) = bearer(headers) {
            match self.authenticate(token).await {
                Ok(Some(user)) => return Ok(authenticated(user)),
                Ok(None) => errors.push("invalid bearer token".into()),
                Err(e) => {
                    tracing::warn!(error = %e, "cannot authenticate a request to the secure port");
                    errors.push(e);
                }
            }
        }
        if errors.is_empty() {
            Ok(anonymous())
        } else {
            Err(errors.join("; "))
        }
    }
}

/// Upstream's AuthenticatedGroupAdder: every authenticated user is in
/// `system:authenticated`.
fn authenticated(mut user: User) -> User {
    if user.name != ANONYMOUS && !user.groups.iter().any(|g| g == AUTHENTICATED) {
        user.groups.push(AUTHENTICATED.into());
    }
    user
}

/// A clear error when `flag`'s kubeconfig `path` does not exist (checked at start, also
/// with the secure port off, so a typo shows before the scheduler runs).
pub fn check_file(flag: &str, path: &std::path::Path) -> crate::Result<()> {
    if path.is_file() {
        Ok(())
    } else {
        Err(crate::Error::Kubeconfig(format!(
            "{flag} {}: no such file",
            path.display()
        )))
    }
}

/// The client reviews for `flag` (`--authentication-kubeconfig`,
/// `--authorization-kubeconfig`) go through: the given kubeconfig (an error when it cannot
/// be read), else the in-cluster service account, as kube-scheduler (its remote kubeconfig
/// is optional, and then it does not fall back to `--kubeconfig`). Not in a cluster: `None`
/// and a warning: tokens are not checked and only always-allowed paths are served.
pub async fn review_client(
    flag: &str,
    path: Option<&std::path::Path>,
) -> crate::Result<Option<Client>> {
    if let Some(path) = path {
        check_file(flag, path)?;
        return crate::client(Some(path))
            .await
            .map(Some)
            .map_err(|e| crate::Error::Kubeconfig(format!("{flag}: {e}")));
    }
    match kube::Config::incluster() {
        Ok(mut config) => {
            config.connect_timeout = Some(crate::client::CONNECT_TIMEOUT);
            Ok(Some(Client::try_from(config)?))
        }
        Err(e) => {
            tracing::warn!(
                flag,
                error = %e,
                "no {flag} given and no in-cluster config: requests to the secure port are \
                 not authenticated and only --authorization-always-allow-paths are served"
            );
            Ok(None)
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn anonymous() -> User {
    User {
        name: ANONYMOUS.into(),
        uid: String::new(),
        groups: vec![UNAUTHENTICATED.into()],
        extra: BTreeMap::new(),
    }
}

fn bearer(headers: &axum::http::HeaderMap) -> Option<&str> {
    let v = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = v.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

fn refuse(code: StatusCode, message: String) -> Response {
    (
        code,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        message,
    )
        .into_response()
}

/// axum middleware: authenticate, then authorize unless the path is always allowed.
pub(crate) async fn guard(
    State(auth): State<Arc<DelegatedAuth>>,
    req: Request,
    next: Next,
) -> Response {
    let path = req.uri().path().to_string();
    let peer = req
        .extensions()
        .get::<PeerCertificate>()
        .cloned()
        .unwrap_or_default();
    let user = match auth.authenticate_request(&peer, req.headers()).await {
        Ok(user) => user,
        Err(e) => {
            tracing::debug!(error = %e, "request to the secure port not authenticated");
            return refuse(StatusCode::UNAUTHORIZED, "Unauthorized\n".into());
        }
    };
    if auth.always_allowed(&path)
        || user
            .groups
            .iter()
            .any(|g| ALWAYS_ALLOW_GROUPS.contains(&g.as_str()))
    {
        return next.run(req).await;
    }
    let verb = req.method().as_str().to_ascii_lowercase();
    match auth.authorize(&user, &verb, &path).await {
        Ok(true) => next.run(req).await,
        Ok(false) => refuse(
            StatusCode::FORBIDDEN,
            format!(
                "forbidden: User \"{}\" cannot {verb} path \"{path}\"\n",
                user.name
            ),
        ),
        Err(e) => {
            tracing::warn!(error = %e, "cannot authorize a request to the secure port");
            refuse(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("Internal Server Error: \"{path}\": {e}\n"),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn always_allowed_paths_match_exactly_or_by_star_prefix() {
        let a = DelegatedAuth::new(None, None, vec!["/healthz".into(), "/debug/*".into()]);
        assert!(a.always_allowed("/healthz"));
        assert!(!a.always_allowed("/healthz/extra"));
        assert!(a.always_allowed("/debug/pprof"));
        assert!(!a.always_allowed("/metrics"));
    }
}
