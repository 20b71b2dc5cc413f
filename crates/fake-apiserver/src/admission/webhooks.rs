//! MutatingAdmissionWebhook and ValidatingAdmissionWebhook: the webhooks of the stored
//! Mutating/ValidatingWebhookConfigurations whose rules, namespaceSelector and
//! objectSelector match the pod are called over HTTPS with an AdmissionReview v1
//! (`clientConfig.url` with `caBundle`; `service` references cannot be resolved here and fail
//! like an unreachable webhook), in configuration-name order. A webhook that cannot be
//! called, or answers badly, refuses the pod unless its `failurePolicy` is `Ignore`. A
//! mutating webhook's JSONPatch is applied to the pod.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use base64::Engine;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::{Map, Value, json};

use super::{Operation, Refusal, Request, objects_of};
use crate::handlers::status;
use crate::store::Inner;

/// The IfNeeded webhooks called so far (configuration/webhook), for the reinvocation.
#[derive(Default)]
pub(super) struct Called(BTreeSet<String>);

/// Whether a label selector (`matchLabels`, `matchExpressions`) selects `labels`. Absent or
/// `{}`: everything.
fn selects(selector: &Value, labels: &Map<String, Value>) -> bool {
    let label = |k: &str| labels.get(k).and_then(Value::as_str);
    let by_labels = selector["matchLabels"]
        .as_object()
        .into_iter()
        .flatten()
        .all(|(k, v)| label(k) == v.as_str());
    let by_expressions = selector["matchExpressions"]
        .as_array()
        .into_iter()
        .flatten()
        .all(|e| {
            let key = e["key"].as_str().unwrap_or("");
            let values: Vec<&str> = e["values"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            match e["operator"].as_str().unwrap_or("") {
                "In" => label(key).is_some_and(|v| values.contains(&v)),
                "NotIn" => label(key).is_none_or(|v| !values.contains(&v)),
                "Exists" => label(key).is_some(),
                "DoesNotExist" => label(key).is_none(),
                _ => false,
            }
        });
    by_labels && by_expressions
}

fn contains(list: &Value, wanted: &[&str]) -> bool {
    list.as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .any(|x| wanted.contains(&x))
}

/// Whether one of the webhook's rules covers this pod write (`pods`, core/v1, namespaced).
fn rules_match(hook: &Value, op: Operation) -> bool {
    hook["rules"].as_array().into_iter().flatten().any(|r| {
        contains(&r["operations"], &[op.as_str(), "*"])
            && contains(&r["apiGroups"], &["", "*"])
            && contains(&r["apiVersions"], &["v1", "*"])
            && contains(&r["resources"], &["pods", "*", "*/*"])
            && matches!(r["scope"].as_str(), None | Some("*" | "Namespaced"))
    })
}

/// The webhooks of `collection` that match, with their keys (configuration/webhook).
fn matching(inner: &Inner, collection: &str, req: &Request, pod: &Value) -> Vec<(String, Value)> {
    let mut ns_labels = inner
        .get("namespaces", "", req.namespace)
        .and_then(|n| n["metadata"]["labels"].as_object().cloned())
        .unwrap_or_default();
    // The API server labels every namespace with its name.
    ns_labels.insert("kubernetes.io/metadata.name".into(), json!(req.namespace));
    let labels_of = |o: &Value| {
        o["metadata"]["labels"]
            .as_object()
            .cloned()
            .unwrap_or_default()
    };
    let configs = objects_of(inner, collection);
    let mut out = Vec::new();
    for config in &configs {
        let config_name = config["metadata"]["name"].as_str().unwrap_or("");
        for hook in config["webhooks"].as_array().into_iter().flatten() {
            let object_selected = selects(&hook["objectSelector"], &labels_of(pod))
                || req
                    .old
                    .is_some_and(|old| selects(&hook["objectSelector"], &labels_of(old)));
            if rules_match(hook, req.operation)
                && selects(&hook["namespaceSelector"], &ns_labels)
                && object_selected
            {
                let name = hook["name"].as_str().unwrap_or("");
                out.push((format!("{config_name}/{name}"), hook.clone()));
            }
        }
    }
    out
}

/// The AdmissionReview v1 the server sends.
fn review(inner: &Inner, req: &Request, pod: &Value) -> (String, Value) {
    let uid = {
        let mut st = inner.store.lock().unwrap();
        st.next_uid += 1;
        format!("admission-{}", st.next_uid)
    };
    let kind = json!({"group": "", "version": "v1", "kind": "Pod"});
    let resource = json!({"group": "", "version": "v1", "resource": "pods"});
    let options = match req.operation {
        Operation::Create => "CreateOptions",
        Operation::Update => "UpdateOptions",
    };
    let body = json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": kind, "resource": resource,
            "requestKind": kind, "requestResource": resource,
            "name": pod["metadata"]["name"].as_str().unwrap_or(""),
            "namespace": req.namespace,
            "operation": req.operation.as_str(),
            "userInfo": {"username": req.user.username, "groups": req.user.groups},
            "object": pod,
            "oldObject": req.old,
            "dryRun": false,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": options},
        },
    });
    (uid, body)
}

/// `https://host[:port][/path]` -> (host, port, path).
fn split_url(url: &str) -> Result<(String, u16, String), String> {
    let rest = url
        .strip_prefix("https://")
        .ok_or_else(|| format!("webhook URL {url:?} is not https"))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) if !h.ends_with(':') && !p.contains(']') => (
            h,
            p.parse::<u16>()
                .map_err(|_| format!("webhook URL {url:?}: bad port"))?,
        ),
        _ => (authority, 443),
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    Ok((host.to_string(), port, path.to_string()))
}

/// POSTs `body` to the webhook and returns the AdmissionReview it answers.
async fn call(hook: &Value, body: &Value) -> Result<Value, String> {
    let cc = &hook["clientConfig"];
    let Some(url) = cc["url"].as_str() else {
        return Err(
            "the fake API server calls webhooks by clientConfig.url only (service references need cluster DNS)"
                .into(),
        );
    };
    let timeout = Duration::from_secs(hook["timeoutSeconds"].as_u64().unwrap_or(10));
    let post = format!("Post \"{url}?timeout={}s\"", timeout.as_secs());
    let (host, port, path) = split_url(url)?;
    let ca = cc["caBundle"]
        .as_str()
        .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
        .unwrap_or_default();
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&ca).flatten() {
        let _ = roots.add(cert);
    }
    if roots.is_empty() {
        return Err(format!("{post}: no certificate in clientConfig.caBundle"));
    }
    let tls = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| e.to_string())?
    .with_root_certificates(roots)
    .with_no_client_auth();
    let name = ServerName::try_from(host.clone()).map_err(|e| format!("{post}: {e}"))?;
    let body = body.to_string();
    let exchange = async {
        let tcp = tokio::net::TcpStream::connect((host.as_str(), port))
            .await
            .map_err(|e| e.to_string())?;
        let stream = tokio_rustls::TlsConnector::from(Arc::new(tls))
            .connect(name, tcp)
            .await
            .map_err(|e| format!("tls: {e}"))?;
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| e.to_string())?;
        tokio::spawn(conn);
        let request = hyper::Request::post(format!("{path}?timeout={}s", timeout.as_secs()))
            .header("host", format!("{host}:{port}"))
            .header("content-type", "application/json")
            .header("accept", "application/json")
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| e.to_string())?;
        let resp = sender
            .send_request(request)
            .await
            .map_err(|e| e.to_string())?;
        let code = resp.status();
        let bytes = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| e.to_string())?
            .to_bytes();
        if code != hyper::StatusCode::OK {
            return Err(format!(
                "the server responded with {code}: {}",
                String::from_utf8_lossy(&bytes).trim()
            ));
        }
        serde_json::from_slice::<Value>(&bytes).map_err(|e| format!("not an AdmissionReview: {e}"))
    };
    match tokio::time::timeout(timeout, exchange).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(format!("{post}: {e}")),
        Err(_) => Err(format!("{post}: context deadline exceeded")),
    }
}

/// What one webhook answered.
enum Answer {
    Allowed(Option<json_patch::Patch>),
    Denied(Refusal),
}

fn denied(webhook: &str, st: &Value) -> Refusal {
    let by = format!("admission webhook \"{webhook}\" denied the request");
    let message = match (st["message"].as_str(), st["reason"].as_str()) {
        (Some(m), _) if !m.is_empty() => format!("{by}: {m}"),
        (_, Some(r)) if !r.is_empty() => format!("{by}: {r}"),
        _ => format!("{by} without explanation"),
    };
    let code = st["code"]
        .as_u64()
        .filter(|c| *c >= 400)
        .and_then(|c| StatusCode::from_u16(c as u16).ok())
        .unwrap_or(StatusCode::BAD_REQUEST);
    Refusal(Box::new(status(
        code,
        st["reason"].as_str().unwrap_or(""),
        message,
    )))
}

/// Calls one webhook; `Err` is a failure the failurePolicy decides about.
async fn ask(
    inner: &Inner,
    req: &Request<'_>,
    hook: &Value,
    pod: &Value,
) -> Result<Answer, String> {
    let webhook = hook["name"].as_str().unwrap_or("");
    let (uid, body) = review(inner, req, pod);
    let reply = call(hook, &body).await?;
    let resp = &reply["response"];
    if resp["uid"].as_str() != Some(&uid) {
        return Err(format!(
            "expected response.uid={uid:?}, got {:?}",
            resp["uid"].as_str().unwrap_or("")
        ));
    }
    if resp["allowed"] != true {
        return Ok(Answer::Denied(denied(webhook, &resp["status"])));
    }
    let Some(b64) = resp["patch"].as_str() else {
        return Ok(Answer::Allowed(None));
    };
    if resp["patchType"] != "JSONPatch" {
        return Err(format!(
            "unsupported patch type {:?}",
            resp["patchType"].as_str().unwrap_or("")
        ));
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .map_err(|e| format!("patch is not base64: {e}"))?;
    let patch = serde_json::from_slice(&bytes).map_err(|e| format!("bad JSON patch: {e}"))?;
    Ok(Answer::Allowed(Some(patch)))
}

/// A webhook that could not be called under `failurePolicy: Fail` (the default).
fn failed(webhook: &str, why: &str) -> Refusal {
    Refusal(Box::new(status(
        StatusCode::INTERNAL_SERVER_ERROR,
        "InternalError",
        format!(
            "Internal error occurred: failed calling webhook \"{webhook}\": failed to call webhook: {why}"
        ),
    )))
}

fn ignores_failures(hook: &Value) -> bool {
    hook["failurePolicy"] == "Ignore"
}

/// Calls the matching mutating webhooks in order, applying their patches; on `reinvoke`
/// only those with `reinvocationPolicy: IfNeeded` called before. Returns whether the pod
/// changed.
pub(super) async fn mutate(
    inner: &Inner,
    req: &Request<'_>,
    pod: &mut Value,
    called: &mut Called,
    reinvoke: bool,
) -> Result<bool, Refusal> {
    let mut changed = false;
    for (key, hook) in matching(inner, "mutatingwebhookconfigurations", req, pod) {
        if reinvoke && !called.0.contains(&key) {
            continue;
        }
        let webhook = hook["name"].as_str().unwrap_or("").to_string();
        match ask(inner, req, &hook, pod).await {
            Ok(Answer::Denied(r)) => return Err(r),
            Ok(Answer::Allowed(None)) => {}
            Ok(Answer::Allowed(Some(patch))) => {
                let mut patched = pod.clone();
                match json_patch::patch(&mut patched, &patch) {
                    Ok(()) => {
                        changed |= patched != *pod;
                        *pod = patched;
                    }
                    Err(e) if !ignores_failures(&hook) => {
                        return Err(failed(&webhook, &format!("applying its patch: {e}")));
                    }
                    Err(_) => {}
                }
            }
            Err(why) if !ignores_failures(&hook) => return Err(failed(&webhook, &why)),
            Err(_) => {}
        }
        if hook["reinvocationPolicy"] == "IfNeeded" {
            called.0.insert(key);
        }
    }
    Ok(changed)
}

/// Calls the matching validating webhooks; the first denial refuses the pod.
pub(super) async fn validate(inner: &Inner, req: &Request<'_>, pod: &Value) -> Result<(), Refusal> {
    for (_, hook) in matching(inner, "validatingwebhookconfigurations", req, pod) {
        let webhook = hook["name"].as_str().unwrap_or("").to_string();
        match ask(inner, req, &hook, pod).await {
            Ok(Answer::Denied(r)) => return Err(r),
            Ok(Answer::Allowed(_)) => {}
            Err(why) if !ignores_failures(&hook) => return Err(failed(&webhook, &why)),
            Err(_) => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_match_labels_and_expressions() {
        let labels = json!({"team": "a", "tier": "web"});
        let labels = labels.as_object().unwrap();
        assert!(selects(&Value::Null, labels));
        assert!(selects(&json!({}), labels));
        assert!(selects(&json!({"matchLabels": {"team": "a"}}), labels));
        assert!(!selects(&json!({"matchLabels": {"team": "b"}}), labels));
        for (op, values, want) in [
            ("In", json!(["web", "db"]), true),
            ("NotIn", json!(["web"]), false),
            ("Exists", json!([]), true),
            ("DoesNotExist", json!([]), false),
        ] {
            let sel =
                json!({"matchExpressions": [{"key": "tier", "operator": op, "values": values}]});
            assert_eq!(selects(&sel, labels), want, "{op}");
        }
    }

    #[test]
    fn rules_match_operations_and_resources() {
        let hook = json!({"rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}]});
        assert!(rules_match(&hook, Operation::Create));
        assert!(!rules_match(&hook, Operation::Update));
        let any = json!({"rules": [{"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"]}]});
        assert!(rules_match(&any, Operation::Update));
        let other = json!({"rules": [{"operations": ["*"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["services"]}]});
        assert!(!rules_match(&other, Operation::Create));
    }

    #[test]
    fn urls_split_into_host_port_and_path() {
        assert_eq!(
            split_url("https://localhost:8443/mutate").unwrap(),
            ("localhost".into(), 8443, "/mutate".into())
        );
        assert_eq!(
            split_url("https://[::1]:9/v").unwrap(),
            ("::1".into(), 9, "/v".into())
        );
        assert_eq!(
            split_url("https://example.com").unwrap(),
            ("example.com".into(), 443, "/".into())
        );
        assert!(split_url("http://x/").is_err());
    }

    #[test]
    fn a_denial_without_a_message_says_so() {
        let Refusal(r) = denied("w", &json!({"code": 200}));
        assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    }
}
