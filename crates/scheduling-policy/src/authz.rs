//! Which SchedulingPolicies a pod's service account may `use`: RBAC, asked of the API server
//! through SubjectAccessReview, as the proposal's admission controller would.
//!
//! The question is asked in the pod's namespace, so a RoleBinding there counts as well as a
//! ClusterRoleBinding (a policy is cluster-scoped, but who may use it is often decided per
//! namespace). Answers are cached briefly per (namespace, service account, policy): pods
//! come in bursts from one ReplicaSet, and each SAR is an API call per policy.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::Pod;
use kube::api::PostParams;
use kube::{Api, Client};
use scheduler_core::policy;

use controller::{Error, Result};

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

/// What the questions asked of the API server may cost. Every pod names its service
/// account, and each account not seen lately costs one SubjectAccessReview per policy, so
/// without bounds anyone who may create pods could make the webhook send thousands of
/// reviews in seconds and keep an answer for each.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SarLimits {
    /// Answers kept; past it expired ones are dropped, then the oldest.
    pub max_entries: usize,
    /// Reviews outstanding at once.
    pub max_in_flight: usize,
    /// Reviews started per second, on average, and in a burst (a token bucket).
    pub qps: f64,
    pub burst: u32,
    /// How long a question may wait for its turn (rate and in-flight slots) before it is
    /// refused with [`Error::Overloaded`] (the webhook answers 503 and the API server
    /// applies the configuration's failurePolicy).
    pub max_wait: Duration,
}

/// Answers kept by default: ~100 bytes each; 2,000 service accounts times 8 policies.
pub const DEFAULT_MAX_ENTRIES: usize = 16_384;
/// Reviews outstanding at once by default.
pub const DEFAULT_MAX_IN_FLIGHT: usize = 16;
/// kube-scheduler's clientConnection defaults (qps 50, burst 100).
pub const DEFAULT_QPS: f64 = 50.0;
pub const DEFAULT_BURST: u32 = 100;
/// Well inside our webhook configurations' `timeoutSeconds: 5`.
pub const DEFAULT_MAX_WAIT: Duration = Duration::from_secs(2);

impl Default for SarLimits {
    fn default() -> Self {
        SarLimits {
            max_entries: DEFAULT_MAX_ENTRIES,
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
            qps: DEFAULT_QPS,
            burst: DEFAULT_BURST,
            max_wait: DEFAULT_MAX_WAIT,
        }
    }
}

/// The start of an over-limit refusal's message.
pub const OVERLOADED: &str = "too many SubjectAccessReviews outstanding";

/// A token bucket as a theoretical arrival time (GCRA): a question may start once `tat`
/// minus the burst allowance has passed; taking a turn moves `tat` one interval on.
struct Bucket {
    tat: Instant,
}

/// Remembers answers: allowed for `allowed_ttl`, denied for `denied_ttl`, at most
/// `limits.max_entries`. Errors are not remembered. Concurrent questions about the same
/// (service account, policy) share one review; reviews are started at most at the
/// limits' rate and concurrency, and a question that cannot start within `max_wait` fails
/// with [`Error::Overloaded`].
pub struct CachedAuthorizer<A> {
    inner: A,
    allowed_ttl: Duration,
    denied_ttl: Duration,
    limits: SarLimits,
    cache: Mutex<HashMap<CacheKey, (bool, Instant)>>,
    /// Questions being asked: followers wait for the leader's answer.
    in_flight: Mutex<HashMap<CacheKey, Arc<tokio::sync::watch::Sender<Option<bool>>>>>,
    slots: tokio::sync::Semaphore,
    bucket: Mutex<Bucket>,
}

/// Removes the leader's entry when its question ends, answered or not (a cancelled
/// request drops it; its followers then ask themselves).
struct Leading<'a> {
    map: &'a Mutex<HashMap<CacheKey, Arc<tokio::sync::watch::Sender<Option<bool>>>>>,
    key: &'a CacheKey,
}

impl Drop for Leading<'_> {
    fn drop(&mut self) {
        self.map
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(self.key);
    }
}

impl<A: Authorizer> CachedAuthorizer<A> {
    /// With the default [`SarLimits`].
    pub fn new(inner: A, allowed_ttl: Duration, denied_ttl: Duration) -> Self {
        Self::with_limits(inner, allowed_ttl, denied_ttl, SarLimits::default())
    }

    pub fn with_limits(
        inner: A,
        allowed_ttl: Duration,
        denied_ttl: Duration,
        limits: SarLimits,
    ) -> Self {
        CachedAuthorizer {
            inner,
            allowed_ttl,
            denied_ttl,
            limits,
            cache: Mutex::default(),
            in_flight: Mutex::default(),
            slots: tokio::sync::Semaphore::new(limits.max_in_flight.max(1)),
            bucket: Mutex::new(Bucket {
                tat: Instant::now(),
            }),
        }
    }

    /// How many answers are kept now.
    pub fn cached(&self) -> usize {
        self.cache.lock().unwrap_or_else(|e| e.into_inner()).len()
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
        if !cache.contains_key(&key) && cache.len() >= self.limits.max_entries {
            let longest = self.allowed_ttl.max(self.denied_ttl);
            cache.retain(|_, (_, at)| at.elapsed() < longest);
            while cache.len() >= self.limits.max_entries.max(1) {
                let Some(oldest) = cache
                    .iter()
                    .min_by_key(|(_, (_, at))| *at)
                    .map(|(k, _)| k.clone())
                else {
                    break;
                };
                cache.remove(&oldest);
            }
        }
        cache.insert(key, (allowed, Instant::now()));
    }

    /// Waits for this question's turn: a token of the bucket, then an in-flight slot,
    /// together at most `max_wait`.
    async fn turn(&self) -> Result<tokio::sync::SemaphorePermit<'_>> {
        let overloaded = || {
            Error::Overloaded(format!(
                "{OVERLOADED} (at most {} at once, {}/s); try again",
                self.limits.max_in_flight, self.limits.qps
            ))
        };
        let now = Instant::now();
        let give_up = now + self.limits.max_wait;
        let start = {
            let interval = Duration::from_secs_f64(1.0 / self.limits.qps.max(1e-3));
            let allowance = interval * self.limits.burst.saturating_sub(1);
            let mut b = self.bucket.lock().unwrap_or_else(|e| e.into_inner());
            let tat = b.tat.max(now);
            let start = tat.checked_sub(allowance).unwrap_or(now).max(now);
            if start > give_up {
                return Err(overloaded());
            }
            b.tat = tat + interval;
            start
        };
        tokio::time::sleep_until(start.into()).await;
        match tokio::time::timeout_at(give_up.into(), self.slots.acquire()).await {
            Ok(Ok(permit)) => Ok(permit),
            _ => Err(overloaded()),
        }
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
            loop {
                if let Some(allowed) = self.lookup(&key) {
                    return Ok(allowed);
                }
                let follow = {
                    let mut m = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
                    match m.get(&key) {
                        Some(tx) => Some(tx.subscribe()),
                        None => {
                            m.insert(key.clone(), Arc::new(tokio::sync::watch::channel(None).0));
                            None
                        }
                    }
                };
                if let Some(mut rx) = follow {
                    // The leader's answer; if it failed or was cancelled, ask again.
                    if let Ok(answer) = rx.wait_for(Option::is_some).await
                        && let Some(allowed) = *answer
                    {
                        return Ok(allowed);
                    }
                    continue;
                }
                let leading = Leading {
                    map: &self.in_flight,
                    key: &key,
                };
                let _permit = self.turn().await?;
                let allowed = self.inner.may_use(sa, policy).await?;
                self.remember(key.clone(), allowed);
                if let Some(tx) = self
                    .in_flight
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .get(&key)
                {
                    tx.send_replace(Some(allowed));
                }
                drop(leading);
                return Ok(allowed);
            }
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

    /// Answers `allowed` for everything once `open` turns true; counts calls.
    struct Gated {
        open: tokio::sync::watch::Receiver<bool>,
        calls: AtomicUsize,
    }

    impl Authorizer for Gated {
        fn may_use<'a>(&'a self, _: &'a ServiceAccount, _: &'a str) -> BoxFuture<'a, Result<bool>> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            let mut open = self.open.clone();
            Box::pin(async move {
                let _ = open.wait_for(|o| *o).await;
                Ok(true)
            })
        }
    }

    fn gated(open: bool) -> (tokio::sync::watch::Sender<bool>, Gated) {
        let (tx, rx) = tokio::sync::watch::channel(open);
        (
            tx,
            Gated {
                open: rx,
                calls: AtomicUsize::new(0),
            },
        )
    }

    const MINUTE: Duration = Duration::from_secs(60);

    #[tokio::test]
    async fn concurrent_questions_about_one_account_and_policy_share_one_review() {
        let (open, fake) = gated(false);
        let authz = CachedAuthorizer::new(fake, MINUTE, MINUTE);
        let sa = ServiceAccount::new("team", "ci");
        let asks = futures::future::join_all((0..100).map(|_| authz.may_use(&sa, "a")));
        // Every question is asked (the first one reaches the fake and waits) before the
        // fake answers.
        let (answers, ()) = tokio::join!(biased; asks, async {
            open.send_replace(true);
        });
        assert!(answers.into_iter().all(|a| a.unwrap()));
        assert_eq!(authz.inner.calls.load(Ordering::SeqCst), 1);
        // Another policy is another question.
        assert!(authz.may_use(&sa, "b").await.unwrap());
        assert_eq!(authz.inner.calls.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn the_cache_keeps_at_most_max_entries_dropping_the_oldest() {
        let (_open, fake) = gated(true);
        let limits = SarLimits {
            max_entries: 3,
            ..SarLimits::default()
        };
        let authz = CachedAuthorizer::with_limits(fake, MINUTE, MINUTE, limits);
        for i in 0..5 {
            let sa = ServiceAccount::new("team", format!("sa-{i}"));
            authz.may_use(&sa, "a").await.unwrap();
            assert!(authz.cached() <= 3, "{}", authz.cached());
        }
        assert_eq!(authz.cached(), 3);
        let calls = || authz.inner.calls.load(Ordering::SeqCst);
        assert_eq!(calls(), 5);
        // The newest is still answered from the cache; the oldest was dropped.
        authz
            .may_use(&ServiceAccount::new("team", "sa-4"), "a")
            .await
            .unwrap();
        assert_eq!(calls(), 5);
        authz
            .may_use(&ServiceAccount::new("team", "sa-0"), "a")
            .await
            .unwrap();
        assert_eq!(calls(), 6);
    }

    /// 2,000 requests naming random service accounts: only the bucket's burst (plus what
    /// refills while they wait) reaches the API server; the rest are refused at once with
    /// `Overloaded`, which the webhook answers with 503.
    #[tokio::test]
    async fn reviews_are_rate_limited_and_the_excess_is_refused() {
        let (_open, fake) = gated(true);
        let limits = SarLimits {
            qps: 0.5,
            burst: 20,
            max_wait: Duration::from_millis(200),
            ..SarLimits::default()
        };
        let authz = CachedAuthorizer::with_limits(fake, MINUTE, MINUTE, limits);
        let accounts: Vec<ServiceAccount> = (0..2000)
            .map(|i| ServiceAccount::new("team", format!("random-{i}")))
            .collect();
        let answers =
            futures::future::join_all(accounts.iter().map(|sa| authz.may_use(sa, "a"))).await;
        let calls = authz.inner.calls.load(Ordering::SeqCst);
        let refused: Vec<_> = answers.iter().filter_map(|a| a.as_ref().err()).collect();
        // The burst and no more: the next token comes 2 s later, past max_wait, and a
        // question whose turn is more than max_wait away is refused without waiting.
        assert_eq!(calls, 20);
        assert_eq!(refused.len(), 2000 - calls);
        assert!(
            refused
                .iter()
                .all(|e| matches!(e, Error::Overloaded(m) if m.starts_with(OVERLOADED))),
            "{:?}",
            refused.first()
        );
    }

    #[tokio::test]
    async fn reviews_outstanding_at_once_are_capped() {
        let (open, fake) = gated(false);
        let limits = SarLimits {
            max_in_flight: 4,
            max_wait: Duration::from_millis(100),
            ..SarLimits::default()
        };
        let authz = CachedAuthorizer::with_limits(fake, MINUTE, MINUTE, limits);
        let accounts: Vec<ServiceAccount> = (0..10)
            .map(|i| ServiceAccount::new("team", format!("sa-{i}")))
            .collect();
        // The fake never answers while they wait: 4 reach it, the others give up after
        // max_wait.
        let answers = futures::future::join_all(accounts.iter().map(|sa| authz.may_use(sa, "a")));
        let answers = tokio::time::timeout(Duration::from_secs(10), async {
            tokio::select! {
                a = answers => a,
                () = async {
                    tokio::time::sleep(Duration::from_secs(2)).await;
                    open.send_replace(true);
                    std::future::pending().await
                } => unreachable!(),
            }
        })
        .await
        .unwrap();
        assert_eq!(authz.inner.calls.load(Ordering::SeqCst), 4);
        assert_eq!(answers.iter().filter(|a| a.is_ok()).count(), 4);
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
