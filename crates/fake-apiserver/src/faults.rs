//! Faults, for robustness tests: errors injected into the next matching requests
//! ([`Fault`]), failed and stolen bindings, an API server "restart" (go down, come back,
//! optionally compacted), expired watches, silent deletes and disabled APIs. The
//! [`record_request`] middleware sees every request first: it logs it, then answers it
//! with the outage or an injected fault, if any, before it is routed.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;

use crate::handlers::status;
use crate::requests::RequestRecord;
use crate::store::{Shared, resource};
use crate::{FakeApiServer, serve};

/// Requests to fail: HTTP method, resource and subresource (`None`: the resource itself,
/// not a subresource), answered with `code` and a Kubernetes `Status` body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fault {
    pub method: String,
    pub resource: String,
    pub subresource: Option<String>,
    pub code: u16,
    /// Seconds for a `Retry-After` header (the API server sends one with 429s).
    pub retry_after: Option<u64>,
    /// Accept the request and never answer (a hung server or a partition); `code` unused.
    pub hang: bool,
}

impl Fault {
    /// E.g. `Fault::new("GET", "pods", 500)`: lists and watches of pods fail.
    pub fn new(method: &str, resource: &str, code: u16) -> Fault {
        Fault {
            method: method.to_ascii_uppercase(),
            resource: resource.to_string(),
            subresource: None,
            code,
            retry_after: None,
            hang: false,
        }
    }

    /// Matching requests are read and never answered (the client has to time out).
    pub fn hang(method: &str, resource: &str) -> Fault {
        Fault {
            hang: true,
            ..Fault::new(method, resource, 0)
        }
    }

    /// Match a subresource instead (`"binding"`, `"status"`).
    pub fn subresource(mut self, sub: &str) -> Fault {
        self.subresource = Some(sub.to_string());
        self
    }

    pub fn retry_after(mut self, secs: u64) -> Fault {
        self.retry_after = Some(secs);
        self
    }

    fn matches(&self, method: &str, r: &RequestRecord) -> bool {
        self.method.eq_ignore_ascii_case(method)
            && self.resource == r.resource
            && self.subresource.as_deref().unwrap_or("") == r.subresource
    }

    fn response(&self) -> Response {
        let code = StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let reason = match self.code {
            429 => "TooManyRequests",
            500 => "InternalError",
            503 => "ServiceUnavailable",
            504 => "Timeout",
            _ => "Unknown",
        };
        let mut resp = status(code, reason, format!("injected fault: {}", self.code));
        if let Some(secs) = self.retry_after {
            resp.headers_mut()
                .insert("retry-after", axum::http::HeaderValue::from(secs));
        }
        resp
    }
}

/// Middleware: logs every request before routing it.
pub(crate) async fn record_request(
    State(inner): State<Shared>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let record = RequestRecord::parse(
        req.method().as_str(),
        req.uri().path(),
        req.uri().query().unwrap_or(""),
    );
    let injected = {
        let mut st = inner.store.lock().unwrap();
        let method = req.method().as_str();
        let down = st.down;
        // While down, faults are not consumed: the outage answers first.
        let fault = st
            .faults
            .iter_mut()
            .filter(|_| !down)
            .find(|(f, left)| *left > 0 && f.matches(method, &record))
            .map(|(f, left)| {
                *left -= 1;
                if f.hang { None } else { Some(f.response()) }
            });
        st.requests.push(record);
        *st.http_versions
            .entry(format!("{:?}", req.version()))
            .or_default() += 1;
        if down {
            // Restarting: refuse, and close the connection as a dying server would.
            let mut resp = status(
                StatusCode::SERVICE_UNAVAILABLE,
                "ServiceUnavailable",
                "the server is shutting down".into(),
            );
            resp.headers_mut().insert(
                axum::http::header::CONNECTION,
                axum::http::HeaderValue::from_static("close"),
            );
            Some(Some(resp))
        } else {
            fault
        }
    };
    match injected {
        Some(Some(resp)) => resp,
        Some(None) => std::future::pending().await,
        None => next.run(req).await,
    }
}

impl FakeApiServer {
    /// The next `n` requests matching `fault` get its error (see [`Fault`]). Faults are
    /// checked in the order added; `usize::MAX` fails until [`Self::clear_faults`].
    pub fn fail_next(&self, n: usize, fault: Fault) {
        self.inner.store.lock().unwrap().faults.push((fault, n));
    }

    /// Removes every injected fault.
    pub fn clear_faults(&self) {
        self.inner.store.lock().unwrap().faults.clear();
    }

    /// How many requests matched `fault` but were not failed yet: 0 once all were served.
    pub fn faults_left(&self) -> usize {
        let st = self.inner.store.lock().unwrap();
        st.faults.iter().map(|(_, left)| *left).sum()
    }

    /// "Restarts" the server, first half: ends every open watch, stops accepting
    /// connections, and answers requests on connections still open with 503 (closing them).
    /// The store is kept. With `compact`, resuming a watch from any resourceVersion seen so
    /// far fails with 410 Expired once the server is back (as after an etcd compaction).
    pub fn go_down(&self, compact: bool) {
        {
            let mut st = self.inner.store.lock().unwrap();
            st.down = true;
            if compact {
                st.rv += 1;
                st.compacted = st.rv;
            }
        }
        // Kept, so `come_back` can wait until the task (and its listener) is gone.
        if let Some(t) = self.task.lock().unwrap().as_ref() {
            t.abort();
        }
        self.inner.generation.send_modify(|g| *g += 1);
    }

    /// Second half of a restart: accepts connections on the same address again.
    pub async fn come_back(&self) {
        // The old listener closes when its aborted task is dropped, which a loaded runtime
        // may do late: wait for it rather than for a fixed time.
        let old = self.task.lock().unwrap().take();
        if let Some(t) = old {
            let _ = t.await;
        }
        let mut tries = 0;
        let listener = loop {
            // The port may still be held briefly by the kernel; retry.
            let socket = tokio::net::TcpSocket::new_v4().unwrap();
            socket.set_reuseaddr(true).unwrap();
            match socket
                .bind(self.addr)
                .and_then(|()| socket.listen(crate::LISTEN_BACKLOG))
            {
                Ok(l) => break l,
                Err(_) if tries < 100 => {
                    tries += 1;
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                }
                Err(e) => panic!("rebinding {}: {e}", self.addr),
            }
        };
        *self.task.lock().unwrap() = Some(serve(
            listener,
            self.app.clone(),
            self.tls.as_ref(),
            &self.inner,
        ));
        self.inner.store.lock().unwrap().down = false;
    }

    /// Serve 404 for `collection` from now on, as a server without that API does.
    pub fn disable(&self, collection: &str) {
        let r = resource(collection);
        self.inner
            .store
            .lock()
            .unwrap()
            .disabled
            .insert(r.collection);
    }

    /// Removes an object without a watch event (as if the event was compacted away while
    /// the watch was down). Follow with [`Self::expire_watches`].
    pub fn delete_silently(&self, collection: &str, ns: &str, name: &str) {
        let key = (collection.to_string(), ns.to_string(), name.to_string());
        let _guard = self.inner.write_lock.lock().unwrap();
        self.inner.store.lock().unwrap().objects.remove(&key);
    }

    /// Ends every open watch and makes resuming from any resourceVersion seen so far fail
    /// with 410 Expired, so clients must relist.
    pub fn expire_watches(&self) {
        {
            let mut st = self.inner.store.lock().unwrap();
            st.rv += 1;
            st.compacted = st.rv;
        }
        self.inner.generation.send_modify(|g| *g += 1);
    }

    /// The next binding of `ns/name` loses a race: the pod is bound to `other_node` by
    /// "someone else" and the controller's Binding gets 409 Conflict.
    pub fn steal_next_binding(&self, ns: &str, name: &str, other_node: &str) {
        self.inner
            .store
            .lock()
            .unwrap()
            .steal
            .insert(format!("{ns}/{name}"), other_node.to_string());
    }

    /// The next `n` Binding requests fail with 503 Service Unavailable.
    pub fn fail_next_bindings(&self, n: usize) {
        self.inner.store.lock().unwrap().failing_bindings = n;
    }
}
