//! SubjectAccessReviews (authorization.k8s.io/v1): answered from the [`Grant`]s a test
//! added, with no RBAC objects evaluated; TokenReviews (authentication.k8s.io/v1): answered
//! from the tokens a test added.

use axum::body::Bytes;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::status;
use crate::store::Inner;

/// One permission for SubjectAccessReviews: `subject` (a user or a group name) may `verb`
/// the `group`/`resource` object `name` (None: any), in `namespace` (None: cluster-wide, as
/// a ClusterRoleBinding; Some: as a RoleBinding there).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Grant {
    pub subject: String,
    pub namespace: Option<String>,
    pub verb: String,
    pub group: String,
    pub resource: String,
    pub name: Option<String>,
}

impl Grant {
    /// A grant for a non-resource URL (`/metrics`): `resource` holds the path.
    pub fn non_resource(subject: &str, verb: &str, path: &str) -> Grant {
        Grant {
            subject: subject.into(),
            verb: verb.into(),
            resource: path.into(),
            ..Grant::default()
        }
    }

    fn allows(&self, spec: &Value) -> bool {
        let a = &spec["resourceAttributes"];
        let s = |v: &Value| v.as_str().unwrap_or("").to_string();
        // A grant to `uid:<uid>` matches the reviewed user's UID.
        let uid_ok = self
            .subject
            .strip_prefix("uid:")
            .is_some_and(|uid| s(&spec["uid"]) == uid);
        let subject = s(&spec["user"]) == self.subject
            || uid_ok
            || spec["groups"]
                .as_array()
                .is_some_and(|gs| gs.iter().any(|g| g.as_str() == Some(&self.subject)));
        if let Some(nr) = spec.get("nonResourceAttributes") {
            // As RBAC's nonResourceURLs: a trailing `*` matches any path with that prefix.
            let path = s(&nr["path"]);
            let path_ok = match self.resource.strip_suffix('*') {
                Some(prefix) => path.starts_with(prefix),
                None => path == self.resource,
            };
            return subject
                && self.resource.starts_with('/')
                && path_ok
                && s(&nr["verb"]) == self.verb;
        }
        subject
            && self
                .namespace
                .as_ref()
                .is_none_or(|ns| *ns == s(&a["namespace"]))
            && s(&a["verb"]) == self.verb
            && s(&a["group"]) == self.group
            && s(&a["resource"]) == self.resource
            && self.name.as_ref().is_none_or(|n| *n == s(&a["name"]))
    }
}

/// `POST /apis/authorization.k8s.io/v1/subjectaccessreviews`: the review with its status.
pub(super) fn subject_access_review(inner: &Inner, body: &Bytes) -> Response {
    let Ok(mut review) = serde_json::from_slice::<Value>(body) else {
        return status(StatusCode::BAD_REQUEST, "BadRequest", "bad review".into());
    };
    let allowed = {
        let st = inner.store.lock().unwrap();
        st.grants.iter().any(|g| g.allows(&review["spec"]))
    };
    review["status"] = json!({"allowed": allowed});
    (StatusCode::CREATED, axum::Json(review)).into_response()
}

/// `POST /apis/authentication.k8s.io/v1/tokenreviews`: authenticated when the token was
/// added with [`FakeApiServer::add_token`](crate::FakeApiServer::add_token).
pub(super) fn token_review(inner: &Inner, body: &Bytes) -> Response {
    let Ok(mut review) = serde_json::from_slice::<Value>(body) else {
        return status(StatusCode::BAD_REQUEST, "BadRequest", "bad review".into());
    };
    let token = review["spec"]["token"].as_str().unwrap_or("").to_string();
    let user = inner.store.lock().unwrap().tokens.get(&token).cloned();
    review["status"] = match user {
        Some((name, groups)) => json!({
            "authenticated": true,
            "user": {"username": name, "uid": format!("uid-{name}"), "groups": groups},
        }),
        None => json!({"authenticated": false, "error": "invalid bearer token"}),
    };
    (StatusCode::CREATED, axum::Json(review)).into_response()
}
