//! What one HTTPS connection may cost, for both servers that use [`crate::serving::tls`]
//! (`run`'s secure port and the SchedulingPolicy webhook): timeouts for each phase of a
//! connection and a cap on how many are open at once.
//!
//! A client that completes TLS and then sends nothing, or one byte every few seconds, or
//! declares a large body and sends one byte, would otherwise keep its connection (a task,
//! TLS state and buffers) forever. The defaults are kube-apiserver's and kube-scheduler's
//! secure serving (`secure_serving.go`): ReadHeaderTimeout 32 s, IdleTimeout 90 s, and the
//! TLS handshake bounded by ReadHeaderTimeout as Go's server does. Upstream has no body
//! read timeout and no connection cap (its handlers time out requests instead); those two
//! are ferrosched's, see [`ServeLimits`].
//!
//! The phases, each with its own deadline on reads:
//!
//! * **head**: from the end of the TLS handshake (or from the first byte of a later
//!   request) until the request's headers are complete: `header_timeout`;
//! * **body**: from the end of the headers until the last byte of the body: `body_timeout`;
//! * **busy**: while the handler runs: no deadline (the handler bounds its own calls);
//! * **idle**: from the handler's answer until the next request's first byte:
//!   `idle_timeout`.
//!
//! A write that makes no progress for `idle_timeout` (a client that stopped reading its
//! response) fails too. A read or write past its deadline fails with `TimedOut`, which
//! ends the connection.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker, ready};
use std::time::Duration;

use axum::Router;
use axum::http::{Request, Response};
use hyper::body::{Body as HttpBody, Frame, Incoming, SizeHint};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

/// Per-connection timeouts and the cap on open connections.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServeLimits {
    /// The TLS handshake (upstream: Go derives it from ReadHeaderTimeout, 32 s).
    pub handshake_timeout: Duration,
    /// Until a request's headers are complete (upstream ReadHeaderTimeout, 32 s).
    pub header_timeout: Duration,
    /// Between the end of the headers and the end of the body. Upstream sets no
    /// ReadTimeout; 30 s is the longest the API server waits for an admission webhook
    /// (`timeoutSeconds` is at most 30), so no legitimate request takes longer.
    pub body_timeout: Duration,
    /// Between an answer and the next request's first byte, and the longest a write may
    /// make no progress (upstream IdleTimeout, 90 s).
    pub idle_timeout: Duration,
    /// Connections open at once, TLS handshakes included; one more is closed as soon as it
    /// is accepted (upstream has no cap).
    pub max_connections: usize,
}

/// Upstream ReadHeaderTimeout ("just shy of requestTimeoutUpperBound").
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(32);
/// Upstream IdleTimeout (matches http.DefaultTransport's keep-alive timeout).
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(90);
/// The longest an admission webhook call may take (`timeoutSeconds` maximum).
pub const BODY_TIMEOUT: Duration = Duration::from_secs(30);
/// The webhook's cap: the API servers call it once per pod write in flight (a
/// kube-apiserver admits at most 200 mutating requests at once), each call on its own
/// HTTP/1.1 connection.
pub const MAX_CONNECTIONS: usize = 1024;
/// `run`'s secure port: the kubelet's probes and a few scrapers.
pub const SECURE_PORT_MAX_CONNECTIONS: usize = 128;

impl Default for ServeLimits {
    fn default() -> Self {
        ServeLimits {
            handshake_timeout: HEADER_TIMEOUT,
            header_timeout: HEADER_TIMEOUT,
            body_timeout: BODY_TIMEOUT,
            idle_timeout: IDLE_TIMEOUT,
            max_connections: MAX_CONNECTIONS,
        }
    }
}

impl ServeLimits {
    /// `run`'s secure port: the defaults with [`SECURE_PORT_MAX_CONNECTIONS`].
    pub fn secure_port() -> Self {
        ServeLimits {
            max_connections: SECURE_PORT_MAX_CONNECTIONS,
            ..Default::default()
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Head,
    Body,
    Busy,
    Idle,
}

struct PhaseState {
    phase: Phase,
    /// Reads must complete by then (None: no deadline).
    deadline: Option<Instant>,
    /// The task of a read left pending without a deadline: woken when one is set, so the
    /// read is polled again and arms its timer (hyper does not poll an idle connection's
    /// read again on its own after answering).
    reader: Option<Waker>,
}

/// One connection's phase, shared by its I/O ([`Guarded`]) and its requests ([`service`]).
pub(crate) struct Watch {
    limits: ServeLimits,
    state: Mutex<PhaseState>,
}

impl Watch {
    /// A connection whose handshake just ended: waiting for the first request's head.
    pub(crate) fn new(limits: ServeLimits) -> Arc<Self> {
        Arc::new(Watch {
            limits,
            state: Mutex::new(PhaseState {
                phase: Phase::Head,
                deadline: Some(Instant::now() + limits.header_timeout),
                reader: None,
            }),
        })
    }

    fn set(&self, phase: Phase, timeout: Option<Duration>) {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.phase = phase;
        st.deadline = timeout.map(|t| Instant::now() + t);
        if st.deadline.is_some()
            && let Some(w) = st.reader.take()
        {
            w.wake();
        }
    }

    /// The read deadline; without one, remembers `waker` to wake when one is set.
    fn deadline(&self, waker: &Waker) -> Option<Instant> {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if st.deadline.is_none() {
            st.reader = Some(waker.clone());
        }
        st.deadline
    }

    /// Bytes arrived: an idle connection starts reading a request head.
    fn bytes_read(&self) {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if st.phase == Phase::Idle {
            st.phase = Phase::Head;
            st.deadline = Some(Instant::now() + self.limits.header_timeout);
        }
    }

    fn headers_read(&self, body_done: bool) {
        if body_done {
            self.set(Phase::Busy, None);
        } else {
            self.set(Phase::Body, Some(self.limits.body_timeout));
        }
    }

    fn body_read(&self) {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if st.phase == Phase::Body {
            st.phase = Phase::Busy;
            st.deadline = None;
        }
    }

    fn answered(&self) {
        self.set(Phase::Idle, Some(self.limits.idle_timeout));
    }
}

fn timed_out(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, what.to_string())
}

/// The connection's stream with the deadlines of its [`Watch`].
pub(crate) struct Guarded<S> {
    inner: S,
    watch: Arc<Watch>,
    read_timer: Pin<Box<Sleep>>,
    /// When the pending write started waiting.
    write_blocked: Option<Instant>,
    write_timer: Pin<Box<Sleep>>,
}

impl<S> Guarded<S> {
    pub(crate) fn new(inner: S, watch: Arc<Watch>) -> Self {
        let far = Instant::now() + Duration::from_secs(86_400);
        Guarded {
            inner,
            watch,
            read_timer: Box::pin(tokio::time::sleep_until(far)),
            write_blocked: None,
            write_timer: Box::pin(tokio::time::sleep_until(far)),
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Guarded<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        let before = buf.filled().len();
        match Pin::new(&mut me.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                if buf.filled().len() > before {
                    me.watch.bytes_read();
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => {
                let Some(deadline) = me.watch.deadline(cx.waker()) else {
                    return Poll::Pending;
                };
                if me.read_timer.deadline() != deadline {
                    me.read_timer.as_mut().reset(deadline);
                }
                ready!(me.read_timer.as_mut().poll(cx));
                Poll::Ready(Err(timed_out("read deadline passed")))
            }
        }
    }
}

impl<S: AsyncWrite + Unpin> Guarded<S> {
    /// A write (or flush) that stays pending for the idle timeout fails.
    fn on_write<T>(&mut self, cx: &mut Context<'_>, r: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        match r {
            Poll::Ready(r) => {
                self.write_blocked = None;
                Poll::Ready(r)
            }
            Poll::Pending => {
                let since = *self.write_blocked.get_or_insert_with(Instant::now);
                let deadline = since + self.watch.limits.idle_timeout;
                if self.write_timer.deadline() != deadline {
                    self.write_timer.as_mut().reset(deadline);
                }
                ready!(self.write_timer.as_mut().poll(cx));
                Poll::Ready(Err(timed_out("write made no progress")))
            }
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Guarded<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let me = self.get_mut();
        let r = Pin::new(&mut me.inner).poll_write(cx, buf);
        me.on_write(cx, r)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        let r = Pin::new(&mut me.inner).poll_flush(cx);
        me.on_write(cx, r)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let me = self.get_mut();
        let r = Pin::new(&mut me.inner).poll_shutdown(cx);
        me.on_write(cx, r)
    }
}

/// A request body that tells the [`Watch`] when it has been read to the end.
pub(crate) struct WatchedBody {
    inner: Incoming,
    watch: Arc<Watch>,
}

impl HttpBody for WatchedBody {
    type Data = hyper::body::Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let r = ready!(Pin::new(&mut self.inner).poll_frame(cx));
        if r.is_none() || self.inner.is_end_stream() {
            self.watch.body_read();
        }
        Poll::Ready(r)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The hyper service of one connection: `app` with the connection's phases tracked and
/// `extension` (what the TLS handshake established about the client) on every request.
pub(crate) fn service<E: Clone + Send + Sync + 'static>(
    app: Router,
    watch: Arc<Watch>,
    extension: E,
) -> impl hyper::service::Service<
    Request<Incoming>,
    Response = Response<axum::body::Body>,
    Error = std::convert::Infallible,
    Future = impl Future<Output = Result<Response<axum::body::Body>, std::convert::Infallible>> + Send,
> {
    hyper::service::service_fn(move |req: Request<Incoming>| {
        watch.headers_read(req.body().is_end_stream());
        let (mut parts, body) = req.into_parts();
        parts.extensions.insert(extension.clone());
        let body = WatchedBody {
            inner: body,
            watch: Arc::clone(&watch),
        };
        let req = Request::from_parts(parts, axum::body::Body::new(body));
        let (app, watch) = (app.clone(), Arc::clone(&watch));
        async move {
            let resp = tower::ServiceExt::oneshot(app, req).await;
            watch.answered();
            resp
        }
    })
}
