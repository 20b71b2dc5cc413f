//! Which SchedulingPolicies a pod's service account may `use`: RBAC, asked of the API server
//! through SubjectAccessReview, as the proposal's admission controller would.
//!
//! The question is asked in the pod's namespace, so a RoleBinding there counts as well as a
//! ClusterRoleBinding (a policy is cluster-scoped, but who may use it is often decided per
//! namespace). Answers are cached briefly per (namespace, service account, policy): pods
//! come in bursts from one ReplicaSet, and each SAR is an API call per policy.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::Pod;
use kube::api::PostParams;
use kube::{Api, Client};
use scheduler_core::policy;

use controller::Result;

/// The RBAC verb that grants a policy.
pub const USE_VERB: &str = "use";
/// The RBAC resource name of SchedulingPolicy.
pub const RESOURCE: &str = "schedulingpolicies";
/// A pod without `spec.serviceAccountName` runs as this one (the API server's default).
pub const DEFAULT_SERVICE_ACCOUNT: &str = "default";
/// How long an "allowed" answer is kept unless configured otherwise.
pub const DEFAULT_ALLOWED_TTL: Duration = Duration::from_secs(30);
/// How long a "denied" answer is kept: shorter, so a new RoleBinding takes effect soon.
pub const DEFAULT_DENIED_TTL: Duration = Duration::from_secs(10);

/// A service account, the subject whose rights decide which policies apply to a pod.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ServiceAccount {
    pub namespace: String,
    pub name: String,
}

impl ServiceAccount {
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        ServiceAccount {
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    /// The pod's service account; `namespace` is the request's when the pod has none yet
    /// (a CREATE may leave `metadata.namespace` to the URL).
    pub fn of_pod(namespace: &str, pod: &Pod) -> Self {
        let ns = pod
            .metadata
            .namespace
            .as_deref()
            .filter(|n| !n.is_empty())
            .unwrap_or(namespace);
        let name = pod
            .spec
            .as_ref()
            .and_then(|s| s.service_account_name.as_deref())
            .filter(|n| !n.is_empty())
            .unwrap_or(DEFAULT_SERVICE_ACCOUNT);
        ServiceAccount::new(ns, name)
    }

    /// The user name the API server gives the service account's token.
    pub fn username(&self) -> String {
        format!("system:serviceaccount:{}:{}", self.namespace, self.name)
    }

    /// The groups every service account token carries.
    pub fn groups(&self) -> Vec<String> {
        vec![
            "system:serviceaccounts".to_string(),
            format!("system:serviceaccounts:{}", self.namespace),
            "system:authenticated".to_string(),
        ]
    }
}

impl std::fmt::Display for ServiceAccount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// Answers "may this service account `use` this policy?". Behind a trait so tests use a
/// fake and the cache wraps any implementation.
pub trait Authorizer: Send + Sync {
    fn may_use<'a>(
        &'a self,
        sa: &'a ServiceAccount,
        policy: &'a str,
    ) -> BoxFuture<'a, Result<bool>>;
}

/// The SubjectAccessReview the API server is asked.
pub fn access_review(sa: &ServiceAccount, policy_name: &str) -> SubjectAccessReview {
    SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(sa.username()),
            groups: Some(sa.groups()),
            resource_attributes: Some(ResourceAttributes {
                namespace: Some(sa.namespace.clone()),
                verb: Some(USE_VERB.to_string()),
                group: Some(policy::GROUP.to_string()),
                resource: Some(RESOURCE.to_string()),
                name: Some(policy_name.to_string()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// Asks the API server (POST /apis/authorization.k8s.io/v1/subjectaccessreviews).
pub struct SarAuthorizer {
    api: Api<SubjectAccessReview>,
}

impl SarAuthorizer {
    pub fn new(client: Client) -> Self {
        SarAuthorizer {
            api: Api::all(client),
        }
    }
}

impl Authorizer for SarAuthorizer {
    fn may_use<'a>(
        &'a self,
        sa: &'a ServiceAccount,
        policy: &'a str,
    ) -> BoxFuture<'a, Result<bool>> {
        Box::pin(async move {
            let review = self
                .api
                .create(&PostParams::default(), &access_review(sa, policy))
                .await?;
            Ok(review.status.is_some_and(|s| s.allowed))
        })
    }
}

type CacheKey = (ServiceAccount, String);

/// Remembers answers: allowed for `allowed_ttl`, denied for `denied_ttl`. Errors are not
/// remembered.
pub struct CachedAuthorizer<A> {
    inner: A,
    allowed_ttl: Duration,
    denied_ttl: Duration,
    cache: Mutex<HashMap<CacheKey, (bool, Instant)>>,
}

/// Past this many entries, expired ones are dropped on insert.
const CACHE_PRUNE_AT: usize = 4096;

impl<A: Authorizer> CachedAuthorizer<A> {
    pub fn new(inner: A, allowed_ttl: Duration, denied_ttl: Duration) -> Self {
        CachedAuthorizer {
            inner,
            allowed_ttl,
            denied_ttl,
            cache: Mutex::default(),
        }
    }

    fn lookup(&self, key: &CacheKey) -> Option<bool> {
        let cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        let (allowed, at) = cache.get(key)?;
        let ttl = if *allowed {
            self.allowed_ttl
        } else {
            self.denied_ttl
        };
        (at.elapsed() < ttl).then_some(*allowed)
    }

    fn remember(&self, key: CacheKey, allowed: bool) {
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        if cache.len() >= CACHE_PRUNE_AT {
            let longest = self.allowed_ttl.max(self.denied_ttl);
            cache.retain(|_, (_, at)| at.elapsed() < longest);
        }
        cache.insert(key, (allowed, Instant::now()));
    }
}

impl<A: Authorizer> Authorizer for CachedAuthorizer<A> {
    fn may_use<'a>(
        &'a self,
        sa: &'a ServiceAccount,
        policy: &'a str,
    ) -> BoxFuture<'a, Result<bool>> {
        Box::pin(async move {
            let key = (sa.clone(), policy.to_string());
            if let Some(allowed) = self.lookup(&key) {
                return Ok(allowed);
            }
            let allowed = self.inner.may_use(sa, policy).await?;
            self.remember(key, allowed);
            Ok(allowed)
        })
    }
}

/// The names among `policies` the service account may use, in the given order. All
/// questions are asked at once; any failure fails the whole answer (an unknown right must
/// not silently become "denied" or "allowed").
pub async fn usable_policies(
    authz: &dyn Authorizer,
    sa: &ServiceAccount,
    policies: &[String],
) -> Result<Vec<String>> {
    let answers =
        futures::future::try_join_all(policies.iter().map(|p| authz.may_use(sa, p))).await?;
    Ok(policies
        .iter()
        .zip(answers)
        .filter(|(_, allowed)| *allowed)
        .map(|(p, _)| p.clone())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Allows `sa:policy` pairs listed; counts calls.
    struct Fake {
        grants: Vec<(&'static str, &'static str)>,
        calls: AtomicUsize,
    }

    impl Authorizer for Fake {
        fn may_use<'a>(
            &'a self,
            sa: &'a ServiceAccount,
            policy: &'a str,
        ) -> BoxFuture<'a, Result<bool>> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            let allowed = self
                .grants
                .iter()
                .any(|(s, p)| *s == sa.to_string() && *p == policy);
            Box::pin(async move { Ok(allowed) })
        }
    }

    fn names(ns: &[&str]) -> Vec<String> {
        ns.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn service_account_of_a_pod_defaults_to_default() {
        let mut pod = Pod::default();
        assert_eq!(
            ServiceAccount::of_pod("team", &pod),
            ServiceAccount::new("team", "default")
        );
        pod.metadata.namespace = Some("other".into());
        pod.spec = Some(k8s_openapi::api::core::v1::PodSpec {
            service_account_name: Some("builder".into()),
            ..Default::default()
        });
        let sa = ServiceAccount::of_pod("team", &pod);
        assert_eq!(sa.username(), "system:serviceaccount:other:builder");
        assert_eq!(
            sa.groups(),
            [
                "system:serviceaccounts",
                "system:serviceaccounts:other",
                "system:authenticated"
            ]
        );
    }

    #[test]
    fn the_review_asks_for_use_of_the_named_policy_in_the_pods_namespace() {
        let r = access_review(&ServiceAccount::new("team", "ci"), "restricted");
        let a = r.spec.resource_attributes.unwrap();
        assert_eq!(
            r.spec.user.as_deref(),
            Some("system:serviceaccount:team:ci")
        );
        assert_eq!(a.verb.as_deref(), Some("use"));
        assert_eq!(a.group.as_deref(), Some("scheduling.ferrosched.io"));
        assert_eq!(a.resource.as_deref(), Some("schedulingpolicies"));
        assert_eq!(a.name.as_deref(), Some("restricted"));
        assert_eq!(a.namespace.as_deref(), Some("team"));
    }

    #[tokio::test]
    async fn usable_policies_keeps_order_and_the_cache_answers_repeats() {
        let authz = CachedAuthorizer::new(
            Fake {
                grants: vec![("team/ci", "a"), ("team/ci", "c")],
                calls: AtomicUsize::new(0),
            },
            Duration::from_secs(30),
            Duration::from_secs(10),
        );
        let sa = ServiceAccount::new("team", "ci");
        let all = names(&["a", "b", "c"]);
        assert_eq!(
            usable_policies(&authz, &sa, &all).await.unwrap(),
            ["a", "c"]
        );
        assert_eq!(
            usable_policies(&authz, &sa, &all).await.unwrap(),
            ["a", "c"]
        );
        assert_eq!(authz.inner.calls.load(Ordering::SeqCst), 3);
        let other = ServiceAccount::new("team", "default");
        assert!(
            usable_policies(&authz, &other, &all)
                .await
                .unwrap()
                .is_empty()
        );
        assert_eq!(authz.inner.calls.load(Ordering::SeqCst), 6);
    }

    #[tokio::test]
    async fn expired_answers_are_asked_again() {
        let authz = CachedAuthorizer::new(
            Fake {
                grants: vec![("team/ci", "a")],
                calls: AtomicUsize::new(0),
            },
            Duration::ZERO,
            Duration::ZERO,
        );
        let sa = ServiceAccount::new("team", "ci");
        for _ in 0..2 {
            assert!(authz.may_use(&sa, "a").await.unwrap());
            assert!(!authz.may_use(&sa, "b").await.unwrap());
        }
        assert_eq!(authz.inner.calls.load(Ordering::SeqCst), 4);
    }
}
