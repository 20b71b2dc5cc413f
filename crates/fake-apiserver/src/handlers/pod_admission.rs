//! Pod CREATE and UPDATE (PUT, PATCH) through [`admission`](crate::admission) before the
//! generic handlers in [`objects`] store them. Admission may call webhooks, so it runs
//! before the write lock is taken; a PATCH is applied to the pod it read, and stored only
//! if nobody wrote the pod meanwhile (else it is applied again, as a real server retries).

use axum::body::Bytes;
use axum::response::Response;
use serde_json::json;

use super::objects::{self, bad_body, decode};
use super::{not_found, strategic_merge};
use crate::admission::{Operation, Refusal, Request, UserInfo, admit_pod};
use crate::store::{Inner, Resource};

pub(super) async fn create(
    inner: &Inner,
    r: &Resource,
    ns: &str,
    body: &Bytes,
    user: UserInfo,
    manager: &str,
) -> Response {
    let Some(mut pod) = decode(body) else {
        return bad_body();
    };
    pod["metadata"]["namespace"] = json!(ns);
    let req = Request {
        operation: Operation::Create,
        namespace: ns,
        old: None,
        user,
    };
    match admit_pod(inner, &req, pod).await {
        Ok(pod) => objects::create(inner, r, ns, &Bytes::from(pod.to_string()), manager),
        Err(Refusal(resp)) => *resp,
    }
}

pub(super) async fn replace(
    inner: &Inner,
    r: &Resource,
    ns: &str,
    name: &str,
    body: &Bytes,
    user: UserInfo,
    manager: &str,
) -> Response {
    let Some(mut pod) = decode(body) else {
        return bad_body();
    };
    let Some(old) = inner.get(r.collection, ns, name) else {
        return not_found(r.collection, name);
    };
    pod["metadata"]["name"] = json!(name);
    pod["metadata"]["namespace"] = json!(ns);
    let req = Request {
        operation: Operation::Update,
        namespace: ns,
        old: Some(&old),
        user,
    };
    match admit_pod(inner, &req, pod).await {
        Ok(pod) => objects::replace(inner, r, ns, name, &Bytes::from(pod.to_string()), manager),
        Err(Refusal(resp)) => *resp,
    }
}

pub(super) async fn patch(
    inner: &Inner,
    r: &Resource,
    ns: &str,
    name: &str,
    body: &Bytes,
    user: UserInfo,
    manager: &str,
) -> Response {
    let Some(patch) = decode(body) else {
        return bad_body();
    };
    let pinned = !patch["metadata"]["resourceVersion"].is_null();
    loop {
        let Some(old) = inner.get(r.collection, ns, name) else {
            return not_found(r.collection, name);
        };
        let mut pod = old.clone();
        strategic_merge(&mut pod, &patch);
        if !pinned {
            // Stored only over the version it was computed from.
            pod["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"].clone();
        }
        let req = Request {
            operation: Operation::Update,
            namespace: ns,
            old: Some(&old),
            user: user.clone(),
        };
        let pod = match admit_pod(inner, &req, pod).await {
            Ok(pod) => pod,
            Err(Refusal(resp)) => return *resp,
        };
        let resp = objects::replace(inner, r, ns, name, &Bytes::from(pod.to_string()), manager);
        if pinned || resp.status() != axum::http::StatusCode::CONFLICT {
            return resp;
        }
    }
}
