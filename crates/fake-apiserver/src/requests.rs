//! The request log's entries: each request as the API server's authorizer sees it
//! ([`RequestRecord`]: verb, group, resource, subresource, namespace, name), for RBAC tests
//! and for matching injected faults.

/// One request in RBAC terms (the apiserver's RequestInfo): what a Role rule must allow.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct RequestRecord {
    /// get, list, watch, create, update, patch, delete, deletecollection.
    pub verb: String,
    /// "" for the core group.
    pub group: String,
    pub resource: String,
    /// "" or e.g. "binding", "status".
    pub subresource: String,
    /// "" for cluster-scoped or all-namespace requests.
    pub namespace: String,
    /// "" for collection requests (list, watch, create).
    pub name: String,
}

impl RequestRecord {
    /// Resource paths: `/api/v1/...` or `/apis/{group}/{version}/...`, then
    /// `[namespaces/{ns}/]{resource}[/{name}[/{subresource}]]`.
    pub(crate) fn parse(method: &str, path: &str, query: &str) -> RequestRecord {
        let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        let (group, rest) = match segs.as_slice() {
            ["api", _version, rest @ ..] => ("", rest),
            ["apis", group, _version, rest @ ..] => (*group, rest),
            _ => ("", &segs[..0]),
        };
        let (namespace, rest) = match rest {
            ["namespaces", ns, rest @ ..] if !rest.is_empty() => (*ns, rest),
            _ => ("", rest),
        };
        let at = |i: usize| rest.get(i).copied().unwrap_or("").to_string();
        let name = at(1);
        let watch = query
            .split('&')
            .any(|kv| kv == "watch=true" || kv == "watch=1");
        let verb = match method {
            "GET" if watch => "watch",
            "GET" if name.is_empty() => "list",
            "GET" => "get",
            "POST" => "create",
            "PUT" => "update",
            "PATCH" => "patch",
            "DELETE" if name.is_empty() => "deletecollection",
            "DELETE" => "delete",
            other => other,
        };
        RequestRecord {
            verb: verb.to_string(),
            group: group.to_string(),
            resource: at(0),
            subresource: at(2),
            namespace: namespace.to_string(),
            name,
        }
    }
}

impl std::fmt::Display for RequestRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let group = if self.group.is_empty() {
            "core"
        } else {
            &self.group
        };
        write!(f, "{} {group} {}", self.verb, self.resource)?;
        if !self.subresource.is_empty() {
            write!(f, "/{}", self.subresource)?;
        }
        if !self.namespace.is_empty() {
            write!(f, " namespace={}", self.namespace)?;
        }
        if !self.name.is_empty() {
            write!(f, " name={}", self.name)?;
        }
        Ok(())
    }
}
