//! The binding cycle's API call: POST a core/v1 Binding to `pods/{name}/binding` (what
//! upstream's DefaultBinder does). The UID in the Binding's metadata makes the API server
//! refuse a re-created pod of the same name.

use k8s_openapi::api::core::v1::{Binding, ObjectReference, Pod};
use kube::Resource;
use kube::api::ObjectMeta;

use crate::binding::podref::PodRef;
use crate::client::retry::{ApiClient, status_code};

#[derive(Debug)]
pub(crate) enum BindError {
    /// 404 or 409: the pod is gone, was re-created, or someone else bound it. Dropped quietly.
    Gone(kube::Error),
    /// Anything else, after retries: reported as a scheduling failure and retried.
    Failed(kube::Error),
    /// The binder extender's bind call failed (or it answered an error).
    Extender(String),
}

/// The controller's Binding call for callers outside the scheduling loop: the bench's
/// binding ceiling POSTs Bindings with no scheduling through exactly the client, rate
/// limiter, retries and request the executor uses.
pub struct Binder(ApiClient);

impl Binder {
    /// `qps`/`burst` as in `clientConnection`.
    pub fn new(client: kube::Client, qps: f32, burst: i32) -> Self {
        Binder(ApiClient::new(client, qps, burst))
    }

    /// Binds `pod` to `node`; 404/409 (gone, re-created, already bound) are errors here.
    pub async fn bind(&self, pod: &PodRef, node: &str) -> Result<(), kube::Error> {
        bind(&self.0, pod, node).await.map_err(|e| match e {
            BindError::Gone(e) | BindError::Failed(e) => e,
            BindError::Extender(e) => kube::Error::Service(e.into()),
        })
    }
}

pub(crate) async fn bind(client: &ApiClient, pod: &PodRef, node: &str) -> Result<(), BindError> {
    let binding = Binding {
        metadata: ObjectMeta {
            name: Some(pod.name.clone()),
            namespace: Some(pod.namespace.clone()),
            uid: (!pod.uid.is_empty()).then(|| pod.uid.clone()),
            ..Default::default()
        },
        target: ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Node".into()),
            name: Some(node.to_string()),
            ..Default::default()
        },
    };
    let pods = Pod::url_path(&(), Some(&pod.namespace));
    let result = client
        .post_unread("bind", &pods, Some((&pod.name, "binding")), &binding)
        .await;
    match result {
        Ok(_) => Ok(()),
        Err(e) if matches!(status_code(&e), Some(404 | 409)) => Err(BindError::Gone(e)),
        Err(e) => Err(BindError::Failed(e)),
    }
}
