//! Admission of pods, emulating the steps of a real kube-apiserver that change or refuse
//! what the scheduler later sees, in its order (1.28's plugin order):
//!
//! ```text
//! POST / PUT / PATCH pods
//!   ▼ defaults                  server-side defaulting (schedulerName)
//!   ▼ priority                  Priority: spec.priority (and preemptionPolicy) from the
//!   │                           PriorityClass or the globalDefault one; refuses a
//!   │                           disagreeing spec.priority
//!   ▼ defaults (tolerations)    DefaultTolerationSeconds: not-ready / unreachable
//!   ▼ runtime_class             RuntimeClass (CREATE): refuses a missing class, merges
//!   │                           overhead, nodeSelector and tolerations
//!   ▼ webhooks::mutate          MutatingAdmissionWebhook: every matching webhook, over HTTPS
//!   │   └ a webhook changed the pod: defaulting and every built-in plugin above run again,
//!   │     then the webhooks with reinvocationPolicy IfNeeded
//!   ▼ runtime_class::validate   RuntimeClass's overhead check
//!   ▼ webhooks::validate        ValidatingAdmissionWebhook
//!   ▼ the store
//! ```
//!
//! Each plugin can be switched off ([`AdmissionPlugin`],
//! [`FakeApiServer::disable_admission_plugin`](crate::FakeApiServer::disable_admission_plugin)),
//! as a cluster admin can with `--disable-admission-plugins`. Objects the tests write
//! through [`FakeApiServer::apply`](crate::FakeApiServer::apply) bypass admission.

use std::collections::BTreeSet;
use std::sync::Mutex;

use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde_json::Value;

use crate::handlers::status;
use crate::store::Inner;

mod defaults;
mod priority;
mod runtime_class;
mod webhooks;

/// The admission plugins the fake server emulates, by upstream's names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AdmissionPlugin {
    Priority,
    DefaultTolerationSeconds,
    RuntimeClass,
    MutatingAdmissionWebhook,
    ValidatingAdmissionWebhook,
}

impl AdmissionPlugin {
    /// Upstream's plugin name (`--enable-admission-plugins`).
    pub fn name(self) -> &'static str {
        match self {
            AdmissionPlugin::Priority => "Priority",
            AdmissionPlugin::DefaultTolerationSeconds => "DefaultTolerationSeconds",
            AdmissionPlugin::RuntimeClass => "RuntimeClass",
            AdmissionPlugin::MutatingAdmissionWebhook => "MutatingAdmissionWebhook",
            AdmissionPlugin::ValidatingAdmissionWebhook => "ValidatingAdmissionWebhook",
        }
    }
}

/// Which plugins are off (every one is on by default, as in kube-apiserver 1.28).
#[derive(Default)]
pub(crate) struct Admission {
    disabled: Mutex<BTreeSet<AdmissionPlugin>>,
}

impl Admission {
    pub(crate) fn set(&self, plugin: AdmissionPlugin, enabled: bool) {
        let mut d = self.disabled.lock().unwrap();
        if enabled {
            d.remove(&plugin);
        } else {
            d.insert(plugin);
        }
    }

    fn on(&self, plugin: AdmissionPlugin) -> bool {
        !self.disabled.lock().unwrap().contains(&plugin)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Operation {
    Create,
    Update,
}

impl Operation {
    fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
        }
    }
}

/// Who sent the request, as webhooks are told (`userInfo`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct UserInfo {
    pub(crate) username: String,
    pub(crate) groups: Vec<String>,
}

impl UserInfo {
    /// `Impersonate-User` / `Impersonate-Group` headers; else the user of a bearer token
    /// added with [`FakeApiServer::add_token`](crate::FakeApiServer::add_token); else an
    /// admin (the fake server's kubeconfig authenticates nobody).
    pub(crate) fn of(inner: &Inner, headers: &HeaderMap) -> UserInfo {
        if let Some(user) = headers
            .get("impersonate-user")
            .and_then(|v| v.to_str().ok())
        {
            let mut groups: Vec<String> = headers
                .get_all("impersonate-group")
                .iter()
                .filter_map(|v| v.to_str().ok().map(str::to_string))
                .collect();
            if !groups.iter().any(|g| g == "system:authenticated") {
                groups.push("system:authenticated".into());
            }
            return UserInfo {
                username: user.to_string(),
                groups,
            };
        }
        let token = headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        if let Some((user, groups)) =
            token.and_then(|t| inner.store.lock().unwrap().tokens.get(t).cloned())
        {
            return UserInfo {
                username: user,
                groups,
            };
        }
        UserInfo {
            username: "system:admin".into(),
            groups: vec!["system:masters".into(), "system:authenticated".into()],
        }
    }
}

/// One pod write under admission.
pub(crate) struct Request<'a> {
    pub(crate) operation: Operation,
    pub(crate) namespace: &'a str,
    /// The previous pod on UPDATE.
    pub(crate) old: Option<&'a Value>,
    pub(crate) user: UserInfo,
}

/// Why admission refused a pod: the API server's answer.
pub(crate) struct Refusal(pub(crate) Box<Response>);

/// A built-in plugin's refusal (`admission.NewForbidden`): 403, `pods "<name>" is forbidden:
/// <why>` (`pods is forbidden: ...` while a generateName pod has no name yet).
fn forbidden(pod: &Value, why: String) -> Refusal {
    let message = match pod["metadata"]["name"].as_str().filter(|n| !n.is_empty()) {
        Some(name) => format!("pods \"{name}\" is forbidden: {why}"),
        None => format!("pods is forbidden: {why}"),
    };
    Refusal(Box::new(status(
        StatusCode::FORBIDDEN,
        "Forbidden",
        message,
    )))
}

/// Every stored object of a cluster-scoped `collection` (a range of the store's ordered
/// keys: admission runs on every pod write and must not scan every object).
fn objects_of(inner: &Inner, collection: &str) -> Vec<Value> {
    let st = inner.store.lock().unwrap();
    let from = (collection.to_string(), String::new(), String::new());
    st.objects
        .range(from..)
        .take_while(|((c, _, _), _)| c == collection)
        .map(|(_, v)| v.clone())
        .collect()
}

/// Defaulting and the built-in mutating plugins, in the server's order.
fn mutate_in_tree(
    inner: &Inner,
    adm: &Admission,
    req: &Request,
    pod: &mut Value,
) -> Result<(), Refusal> {
    defaults::server_defaults(pod);
    if adm.on(AdmissionPlugin::Priority) {
        priority::admit(inner, req, pod)?;
    }
    if adm.on(AdmissionPlugin::DefaultTolerationSeconds) {
        defaults::default_toleration_seconds(pod);
    }
    if adm.on(AdmissionPlugin::RuntimeClass) && req.operation == Operation::Create {
        runtime_class::admit(inner, pod)?;
    }
    Ok(())
}

/// Runs the admission chain on a pod about to be written; returns the pod to store.
pub(crate) async fn admit_pod(
    inner: &Inner,
    req: &Request<'_>,
    mut pod: Value,
) -> Result<Value, Refusal> {
    let adm = &inner.admission;
    mutate_in_tree(inner, adm, req, &mut pod)?;
    if adm.on(AdmissionPlugin::MutatingAdmissionWebhook) {
        let mut called = webhooks::Called::default();
        let changed = webhooks::mutate(inner, req, &mut pod, &mut called, false).await?;
        if changed {
            // The server decodes the patched pod with defaulting and runs every in-tree
            // plugin again; then the webhooks that asked for it (IfNeeded).
            mutate_in_tree(inner, adm, req, &mut pod)?;
            webhooks::mutate(inner, req, &mut pod, &mut called, true).await?;
        }
    }
    if adm.on(AdmissionPlugin::RuntimeClass) && req.operation == Operation::Create {
        runtime_class::validate(inner, &pod)?;
    }
    if adm.on(AdmissionPlugin::ValidatingAdmissionWebhook) {
        webhooks::validate(inner, req, &pod).await?;
    }
    Ok(pod)
}
