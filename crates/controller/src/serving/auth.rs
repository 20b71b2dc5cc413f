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

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::PostParams;
use kube::{Api, Client};
use tokio::time::Instant;

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

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct User {
    name: String,
    uid: String,
    groups: Vec<String>,
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
            tokens: Mutex::new(HashMap::new()),
            decisions: Mutex::new(HashMap::new()),
        }
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
    }
}

fn bearer(req: &Request) -> Option<&str> {
    let v = req.headers().get(header::AUTHORIZATION)?.to_str().ok()?;
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
    let user = match bearer(&req) {
        None => anonymous(),
        Some(token) => match auth.authenticate(token).await {
            Ok(Some(user)) => user,
            Ok(None) => return refuse(StatusCode::UNAUTHORIZED, "Unauthorized\n".into()),
            Err(e) => {
                tracing::warn!(error = %e, "cannot authenticate a request to the secure port");
                return refuse(StatusCode::UNAUTHORIZED, "Unauthorized\n".into());
            }
        },
    };
    if auth.always_allowed(&path) {
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
