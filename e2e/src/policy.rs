//! SchedulingPolicy on the target: the webhook (`scheduling_policy::webhook`, as `ferrosched
//! webhook` serves it) runs in-process over HTTPS with a certificate from a CA made per run,
//! and is registered with the target's API server through a Mutating- and a
//! ValidatingWebhookConfiguration that select only the scenario's namespace. Policies,
//! service accounts and `use` grants are created through the API (on the fake server a
//! grant is an entry its SubjectAccessReviews answer from; on a cluster a ClusterRole and
//! a RoleBinding).
//!
//! On a cluster the API server must reach the webhook: it listens on
//! `FERROSCHED_E2E_WEBHOOK_BIND` (default `127.0.0.1`, enough when kube-apiserver runs on
//! this host) and is called at `https://$FERROSCHED_E2E_WEBHOOK_HOST:<port>` (default
//! `localhost`; an IP or DNS name the certificate is made for). The SchedulingPolicy CRD
//! (`manifests/policy/crd.yaml`) must be installed.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, RoleBinding};
use kube::api::{Api, DynamicObject, PostParams};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use scheduling_policy::authz::{CachedAuthorizer, SarAuthorizer};
use scheduling_policy::informer::{self, Policies};
use scheduling_policy::webhook::{self, Webhook};
use serde_json::{Value, json};

use crate::{Env, PodBuilder, Target};

/// The webhook's address as the API server calls it, and where it listens.
fn webhook_host() -> (String, String) {
    let host = std::env::var("FERROSCHED_E2E_WEBHOOK_HOST").unwrap_or_else(|_| "localhost".into());
    let bind = std::env::var("FERROSCHED_E2E_WEBHOOK_BIND").unwrap_or_else(|_| "127.0.0.1".into());
    (host, bind)
}

impl Env {
    /// Serves the SchedulingPolicy webhook in-process and registers it for pods in the
    /// scenario's namespace (`failurePolicy: Fail`); returns once it has listed the
    /// policies. Stopped by [`Env::finish`] (or on drop); its configurations carry the run
    /// label and are deleted with everything else.
    pub async fn start_policy_webhook(&mut self) {
        let (host, bind) = webhook_host();
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(vec![host.clone()])
            .unwrap()
            .signed_by(&key, &ca)
            .unwrap();
        let dir = std::env::temp_dir().join(format!("ferrosched-e2e-webhook-{}", self.id));
        std::fs::create_dir_all(&dir).unwrap();
        let (c, k) = (dir.join("tls.crt"), dir.join("tls.key"));
        std::fs::write(&c, cert.pem()).unwrap();
        std::fs::write(&k, key.serialize_pem()).unwrap();
        let cert = Arc::new(controller::tls::ReloadingCert::new(c, k).unwrap());
        let tls = Arc::new(controller::tls::server_config(cert).unwrap());
        let listener = tokio::net::TcpListener::bind((bind.as_str(), 0))
            .await
            .unwrap_or_else(|e| panic!("webhook listener on {bind}: {e}"));
        let port = listener.local_addr().unwrap().port();

        let policies = Arc::new(Policies::default());
        let watch = tokio::spawn(informer::watch(
            self.client.clone(),
            Arc::clone(&policies),
            || {},
        ));
        let hook = Arc::new(Webhook {
            policies: Arc::clone(&policies),
            // Short "denied" caching: a grant made after a denial is seen soon.
            authz: Arc::new(CachedAuthorizer::new(
                SarAuthorizer::new(self.client.clone()),
                Duration::from_secs(30),
                Duration::from_secs(1),
            )),
            priority_classes: Arc::new(self.client.clone()),
        });
        let serve = tokio::spawn(controller::tls::serve(
            listener,
            tls,
            webhook::router(hook),
            Box::pin(std::future::pending()),
        ));
        self.background.push(watch);
        self.background.push(serve);
        let policies = &policies;
        self.eventually(
            "the webhook's first list of SchedulingPolicies",
            move || async move {
                policies
                    .is_synced()
                    .then_some(())
                    .ok_or("not yet".to_string())
            },
        )
        .await;

        let ca_bundle = base64::engine::general_purpose::STANDARD.encode(ca.pem());
        let hook = |path: &str, operations: Value| {
            json!({
                "name": format!("{path}.{}.e2e.ferrosched.io", self.id),
                "clientConfig": {"url": format!("https://{host}:{port}/{path}"), "caBundle": ca_bundle},
                "rules": [{"operations": operations, "apiGroups": [""], "apiVersions": ["v1"],
                           "resources": ["pods"], "scope": "Namespaced"}],
                // Only this scenario's namespace: nothing else in a cluster is affected.
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": self.ns}},
                "failurePolicy": "Fail", "sideEffects": "None",
                "admissionReviewVersions": ["v1"], "timeoutSeconds": 5,
            })
        };
        let name = self.name("scheduling-policy");
        self.create_cluster::<MutatingWebhookConfiguration>(json!({
            "metadata": {"name": name},
            "webhooks": [hook("mutate", json!(["CREATE"]))],
        }))
        .await;
        self.create_cluster::<ValidatingWebhookConfiguration>(json!({
            "metadata": {"name": name},
            "webhooks": [hook("validate", json!(["CREATE", "UPDATE"]))],
        }))
        .await;
    }

    /// A SchedulingPolicy [`Env::name`]`(short)` with `spec`; waits until the webhook's
    /// watch has it. Returns its name.
    pub async fn create_policy(&self, short: &str, spec: Value) -> String {
        let name = self.name(short);
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &informer::api_resource());
        let mut obj = json!({
            "apiVersion": scheduler_core::policy::API_VERSION,
            "kind": scheduler_core::policy::KIND,
            "metadata": {"name": name},
            "spec": spec,
        });
        crate::merge(&mut obj, json!({"metadata": {"labels": self.labels()}}));
        let obj: DynamicObject = serde_json::from_value(obj).unwrap();
        api.create(&PostParams::default(), &obj)
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "creating SchedulingPolicy {name} (is manifests/policy/crd.yaml applied?): {e}"
                )
            });
        name
    }

    /// A ServiceAccount in the scenario's namespace.
    pub async fn create_service_account(&self, name: &str) {
        self.create::<ServiceAccount>(json!({"metadata": {"name": name}}))
            .await;
    }

    /// Lets the namespace's service account `sa` `use` the policy `policy`.
    pub async fn grant_policy(&self, sa: &str, policy: &str) {
        match self.target {
            Target::Fake => {
                let server = self.fake.as_ref().expect("the fake target has a server");
                server.grant(fake_apiserver::Grant {
                    subject: format!("system:serviceaccount:{}:{sa}", self.ns),
                    namespace: Some(self.ns.clone()),
                    verb: "use".into(),
                    group: scheduler_core::policy::GROUP.into(),
                    resource: "schedulingpolicies".into(),
                    name: Some(policy.into()),
                });
            }
            Target::Cluster => {
                let role = format!("{policy}-use-{sa}");
                self.create_cluster::<ClusterRole>(json!({
                    "metadata": {"name": role},
                    "rules": [{"apiGroups": [scheduler_core::policy::GROUP],
                               "resources": ["schedulingpolicies"],
                               "resourceNames": [policy], "verbs": ["use"]}],
                }))
                .await;
                self.create::<RoleBinding>(json!({
                    "metadata": {"name": role},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
                    "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": self.ns}],
                }))
                .await;
            }
        }
    }

    /// Creates the pod, returning the API server's refusal instead of panicking.
    pub async fn try_create_pod(&self, pod: PodBuilder) -> Result<Pod, kube::Error> {
        let mut object = pod.0;
        crate::merge(
            &mut object,
            json!({"metadata": {"namespace": self.ns, "labels": self.labels()}}),
        );
        let typed: Pod = serde_json::from_value(object).unwrap();
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &self.ns);
        api.create(&PostParams::default(), &typed).await
    }
}

/// The API server's message of a refused request.
pub fn refusal(e: kube::Error) -> (u16, String) {
    match e {
        kube::Error::Api(s) => (s.code, s.message),
        other => panic!("expected the API server to refuse the request, got {other}"),
    }
}
