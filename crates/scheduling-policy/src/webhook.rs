//! `ferrosched webhook`: the proposal's admission controller for SchedulingPolicy, served as
//! a mutating and a validating admission webhook over HTTPS.
//!
//! * `POST /mutate`: on pod CREATE, the JSON patch that sets the merged policy's defaults for
//!   the fields the pod leaves unset (what the API server filled in before webhooks, such as
//!   the globalDefault PriorityClass, counts as unset: `policy::apply_defaults_after`). Never denies: rejecting is `/validate`'s job, which the
//!   API server calls after every mutation, on the defaulted pod.
//! * `POST /validate`: denies a pod that violates the merge of the policies its service
//!   account may `use`, listing every violation. Polices CREATE, and UPDATEs that change a
//!   scheduling field (tolerations may be added to a running pod, nodeSelector and affinity
//!   changed while it is gated), so a grant cannot be sidestepped by a later update.
//! * `GET /healthz`: 200 once the policies have been listed, 503 before.
//!
//! The webhook decides only what it can: a pod outside the policies is denied (`allowed:
//! false`). When it cannot decide (policies not listed yet, a SubjectAccessReview failed) it
//! answers HTTP 503/500 instead, so the API server applies the webhook configuration's
//! `failurePolicy` — the admin's choice between failing closed (`Fail`, our manifests'
//! default) and open (`Ignore`).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use base64::Engine;
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview, Operation};
use scheduler_core::policy::{self, GlobalDefaultClass, PodFields, PolicySpec, ServerSet};
use serde_json::Value;
use tokio::net::TcpListener;

use controller::{Error, Result, tls};

use crate::authz::{Authorizer, ServiceAccount, usable_policies};
use crate::informer::Policies;

/// Starts every denial; the service account, its usable policies and each violation follow.
pub const DENIED: &str = "pod violates the SchedulingPolicies its service account may use";
/// `/healthz` and the admission endpoints before the first list of policies.
pub const NOT_SYNCED: &str = "SchedulingPolicies not listed yet";
/// A body that is not an AdmissionReview v1 with a request; the reason follows.
pub const BAD_REVIEW: &str = "expected an AdmissionReview (admission.k8s.io/v1) with a request";

/// The largest request body read: an AdmissionReview carries at most two objects (an
/// UPDATE's object and oldObject), each at most the API server's 3 MiB request body limit,
/// plus less than 1 MiB for the rest (controller-runtime's webhooks use the same bound).
/// axum's default, 2 MiB, refused the UPDATE of any pod over 1 MiB.
pub const MAX_REQUEST_BODY: usize = 7 * 1024 * 1024;

/// The only AdmissionReview version read: the webhook configurations
/// (`manifests/policy/webhook.yaml`) declare `admissionReviewVersions: ["v1"]`, so the API
/// server never sends another.
pub const REVIEW_API_VERSION: &str = "admission.k8s.io/v1";

/// What the handlers share.
pub struct Webhook {
    pub policies: Arc<Policies>,
    pub authz: Arc<dyn Authorizer>,
    pub priority_classes: Arc<dyn PriorityClassLookup>,
}

/// Tells whether a PriorityClass is the cluster's `globalDefault` one: the Priority
/// admission plugin names that class on pods that name none, before webhooks run, so a
/// policy's `default.priorityClassName` must treat it as unset.
pub trait PriorityClassLookup: Send + Sync {
    fn global_default<'a>(
        &'a self,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<GlobalDefaultClass>>>;
}

/// Reads the class from the API server (`get priorityclasses`), only for pods that name a
/// class other than their policy's default.
impl PriorityClassLookup for kube::Client {
    fn global_default<'a>(
        &'a self,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<GlobalDefaultClass>>> {
        Box::pin(async move {
            let api: kube::Api<PriorityClass> = kube::Api::all(self.clone());
            let class = api.get_opt(name).await.map_err(Error::Kube)?;
            Ok(class
                .filter(|c| c.global_default == Some(true))
                .map(|c| GlobalDefaultClass {
                    name: name.to_string(),
                    preemption_policy: c.preemption_policy,
                }))
        })
    }
}

/// The denial message: every violation, in the order the evaluation found them.
pub fn denial_message(sa: &ServiceAccount, usable: &[String], violations: &[String]) -> String {
    let usable = if usable.is_empty() {
        "none".to_string()
    } else {
        usable.join(", ")
    };
    format!(
        "{DENIED} (service account {sa}; usable policies: {usable}): {}",
        violations.join("; ")
    )
}

impl Webhook {
    /// The service account of the pod, the policies it may use and their merge (Option 1).
    async fn merged_for(
        &self,
        req: &AdmissionRequest<Pod>,
        pod: &Pod,
    ) -> Result<(ServiceAccount, Vec<String>, PolicySpec)> {
        let sa = ServiceAccount::of_pod(req.namespace.as_deref().unwrap_or(""), pod);
        let names = self.policies.store.names();
        let usable = usable_policies(self.authz.as_ref(), &sa, &names).await?;
        let merged = self.policies.store.effective(&usable);
        Ok((sa, usable, merged))
    }

    /// `/mutate`: the defaults as a JSON patch on CREATE; everything else passes unchanged.
    pub async fn mutate(&self, req: &AdmissionRequest<Pod>) -> Result<AdmissionResponse> {
        let resp = AdmissionResponse::from(req);
        let (Operation::Create, Some(pod)) = (&req.operation, &req.object) else {
            return Ok(resp);
        };
        let (_, _, merged) = self.merged_for(req, pod).await?;
        let mut server = ServerSet::default();
        let named = pod
            .spec
            .as_ref()
            .and_then(|s| s.priority_class_name.as_deref())
            .filter(|n| !n.is_empty());
        if let (Some(named), Some(default)) = (named, &merged.defaults.priority_class_name)
            && named != default
        {
            server.global_default_class = self.priority_classes.global_default(named).await?;
        }
        let defaulted = policy::apply_defaults_after(pod, &merged, &server);
        if defaulted.patch.is_empty() {
            return Ok(resp);
        }
        let patch: json_patch::Patch = serde_json::to_value(&defaulted.patch)
            .and_then(serde_json::from_value)
            .map_err(|e| Error::Admission(e.to_string()))?;
        resp.with_patch(patch)
            .map_err(|e| Error::Admission(e.to_string()))
    }

    /// `/validate`: denies a pod outside its merged policy with every violation.
    pub async fn validate(&self, req: &AdmissionRequest<Pod>) -> Result<AdmissionResponse> {
        let resp = AdmissionResponse::from(req);
        let Some(pod) = &req.object else {
            return Ok(resp);
        };
        let fields = PodFields::from_pod(pod);
        match (&req.operation, &req.old_object) {
            (Operation::Create, _) => {}
            (Operation::Update, Some(old)) if PodFields::from_pod(old) == fields => {
                return Ok(resp);
            }
            (Operation::Update, _) => {}
            _ => return Ok(resp),
        }
        let (sa, usable, merged) = self.merged_for(req, pod).await?;
        let verdict = policy::evaluate(&fields, &merged);
        if verdict.is_allowed() {
            return Ok(resp);
        }
        Ok(resp.deny(denial_message(&sa, &usable, &verdict.violations)))
    }
}

/// The AdmissionReview to send back. kube's type serializes `patch` as a JSON array of
/// bytes; the API documents (and every other webhook sends) a base64 string.
pub fn review_json(mut resp: AdmissionResponse) -> Value {
    let patch = resp.patch.take();
    let mut v = serde_json::to_value(resp.into_review()).unwrap_or(Value::Null);
    if let (Some(p), Some(Value::Object(r))) = (patch, v.get_mut("response")) {
        r.insert(
            "patch".into(),
            base64::engine::general_purpose::STANDARD.encode(p).into(),
        );
    }
    v
}

#[derive(Clone, Copy)]
enum Endpoint {
    Mutate,
    Validate,
}

/// The request of an AdmissionReview v1 about a pod, with what its operation needs: the
/// object for CREATE and UPDATE, the old object for UPDATE (the API server always sends
/// them). `Err` is why not.
pub fn parse_review(body: &[u8]) -> std::result::Result<AdmissionRequest<Pod>, String> {
    let review: AdmissionReview<Pod> = serde_json::from_slice(body).map_err(|e| e.to_string())?;
    if review.types.api_version != REVIEW_API_VERSION {
        return Err(format!(
            "apiVersion {:?} is not {REVIEW_API_VERSION}",
            review.types.api_version
        ));
    }
    if review.types.kind != "AdmissionReview" {
        return Err(format!(
            "kind {:?} is not AdmissionReview",
            review.types.kind
        ));
    }
    let Some(mut req) = review.request else {
        return Err("no request".into());
    };
    // The answer is sent in the request's version.
    req.types = review.types;
    if req.uid.is_empty() {
        return Err("request.uid is empty".into());
    }
    let k = &req.kind;
    if (k.group.as_str(), k.version.as_str(), k.kind.as_str()) != ("", "v1", "Pod") {
        return Err(format!(
            "request.kind {}/{}, Kind={} is not a v1 Pod",
            k.group, k.version, k.kind
        ));
    }
    let r = &req.resource;
    if (r.group.as_str(), r.version.as_str(), r.resource.as_str()) != ("", "v1", "pods") {
        return Err(format!(
            "request.resource {}/{}, Resource={} is not v1 pods",
            r.group, r.version, r.resource
        ));
    }
    if let Some(sub) = req.sub_resource.as_deref().filter(|s| !s.is_empty()) {
        return Err(format!(
            "request.subResource {sub:?}: only pods themselves are reviewed"
        ));
    }
    let op = match req.operation {
        Operation::Create => "CREATE",
        Operation::Update => "UPDATE",
        _ => return Ok(req),
    };
    if req.object.is_none() {
        return Err(format!("request.object is required for {op}"));
    }
    if req.operation == Operation::Update && req.old_object.is_none() {
        return Err(format!("request.oldObject is required for {op}"));
    }
    Ok(req)
}

async fn handle(hook: &Webhook, body: &[u8], endpoint: Endpoint) -> Response {
    if !hook.policies.is_synced() {
        return (StatusCode::SERVICE_UNAVAILABLE, NOT_SYNCED).into_response();
    }
    let req = match parse_review(body) {
        Ok(r) => r,
        Err(e) => return (StatusCode::BAD_REQUEST, format!("{BAD_REVIEW}: {e}")).into_response(),
    };
    let answer = match endpoint {
        Endpoint::Mutate => hook.mutate(&req).await,
        Endpoint::Validate => hook.validate(&req).await,
    };
    match answer {
        Ok(resp) => axum::Json(review_json(resp)).into_response(),
        Err(e) => {
            tracing::warn!(uid = %req.uid, error = %e, "cannot decide; leaving it to failurePolicy");
            // Over the SubjectAccessReview limits: 503, the API server may try again.
            let status = if matches!(e, Error::Overloaded(_)) {
                StatusCode::SERVICE_UNAVAILABLE
            } else {
                StatusCode::INTERNAL_SERVER_ERROR
            };
            (status, e.to_string()).into_response()
        }
    }
}

/// Answers a request whose body could be read; 413 past [`MAX_REQUEST_BODY`].
async fn answer(
    hook: &Webhook,
    body: std::result::Result<Bytes, BytesRejection>,
    endpoint: Endpoint,
) -> Response {
    match body {
        Ok(body) => handle(hook, &body, endpoint).await,
        Err(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => (
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "request body over {MAX_REQUEST_BODY} bytes (two objects of the API server's \
                 3 MiB request limit plus 1 MiB)"
            ),
        )
            .into_response(),
        Err(e) => e.into_response(),
    }
}

async fn mutate(
    State(hook): State<Arc<Webhook>>,
    body: std::result::Result<Bytes, BytesRejection>,
) -> Response {
    answer(&hook, body, Endpoint::Mutate).await
}

async fn validate(
    State(hook): State<Arc<Webhook>>,
    body: std::result::Result<Bytes, BytesRejection>,
) -> Response {
    answer(&hook, body, Endpoint::Validate).await
}

async fn healthz(State(hook): State<Arc<Webhook>>) -> Response {
    if hook.policies.is_synced() {
        (StatusCode::OK, "ok").into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, NOT_SYNCED).into_response()
    }
}

/// `/mutate`, `/validate` and `/healthz`.
pub fn router(hook: Arc<Webhook>) -> Router {
    Router::new()
        .route("/mutate", post(mutate))
        .route("/validate", post(validate))
        .route("/healthz", get(healthz))
        .layer(DefaultBodyLimit::max(MAX_REQUEST_BODY))
        .with_state(hook)
}

/// `/mutate` and `/validate` without a verified client certificate when a client CA is
/// configured.
pub const CLIENT_CERT_REQUIRED: &str = "a client certificate signed by --client-ca-file is \
     required (the API server presents the one in its AdmissionConfiguration's kubeconfig)";

/// With a client CA: only `/healthz` (the kubelet's probes present no certificate) is
/// served to callers without a verified certificate; the rest is 401.
async fn require_client_certificate(
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let verified = req
        .extensions()
        .get::<tls::PeerCertificate>()
        .is_some_and(|c| c.0.is_some());
    if verified || req.uri().path() == "/healthz" {
        next.run(req).await
    } else {
        (StatusCode::UNAUTHORIZED, CLIENT_CERT_REQUIRED).into_response()
    }
}

/// Everything [`run`] needs.
pub struct WebhookOptions {
    pub client: kube::Client,
    pub listener: TcpListener,
    pub cert: Arc<tls::ReloadingCert>,
    /// How long SubjectAccessReview answers are cached.
    pub allowed_ttl: Duration,
    pub denied_ttl: Duration,
    /// Connection timeouts and cap (`ServeLimits::default()`: upstream's secure serving
    /// timeouts, 1024 connections).
    pub limits: controller::conn::ServeLimits,
    /// PEM bundle of the CA that signs the API server's client certificate; when set,
    /// `/mutate` and `/validate` need one (read once, at start).
    pub client_ca: Option<std::path::PathBuf>,
    pub shutdown: std::pin::Pin<Box<dyn Future<Output = ()> + Send>>,
}

/// Watches SchedulingPolicies and serves the webhook until `shutdown` resolves.
pub async fn run(opts: WebhookOptions) -> Result<()> {
    let tls = Arc::new(tls::server_config_with_client_ca(
        opts.cert,
        opts.client_ca.as_deref(),
    )?);
    let policies = Arc::new(Policies::default());
    let watch = tokio::spawn(crate::informer::watch(
        opts.client.clone(),
        Arc::clone(&policies),
        || {},
    ));
    let authz = crate::authz::CachedAuthorizer::new(
        crate::authz::SarAuthorizer::new(opts.client.clone()),
        opts.allowed_ttl,
        opts.denied_ttl,
    );
    let hook = Arc::new(Webhook {
        policies,
        authz: Arc::new(authz),
        priority_classes: Arc::new(opts.client.clone()),
    });
    tracing::info!(
        addr = %opts.listener.local_addr().map(|a| a.to_string()).unwrap_or_default(),
        "ferrosched webhook serving /mutate, /validate, /healthz"
    );
    let mut app = router(hook);
    if opts.client_ca.is_some() {
        app = app.layer(axum::middleware::from_fn(require_client_certificate));
    }
    tls::serve_with(opts.listener, tls, app, opts.limits, opts.shutdown).await;
    watch.abort();
    Ok(())
}
