//! List, then watch, as one stream of `watcher::Event`s, decoding protobuf or JSON by each
//! response's Content-Type (see the module above for why this is not kube's watcher).
//!
//! Behaves as kube's `watcher` with `any_semantic()` and its default backoff: the list asks
//! for resourceVersion 0 (the watch cache) and follows continue tokens; the watch starts
//! at the list's version with bookmarks and a 290 s timeout and restarts from the last
//! version seen; a 410 (on the watch request or as an ERROR event) relists; every other
//! failure is logged and retried after 0.8 s, doubling to 30 s, back to 0.8 s once an
//! attempt succeeds. A protobuf list's items are decoded one at a time as they are applied,
//! so the list's objects never all exist at once.

use std::collections::VecDeque;
use std::fmt::Debug;
use std::time::Duration;

use futures::Stream;
use http_body_util::BodyExt;
use hyper::body::Bytes;
use hyper::http;
use kube::Client;
use kube::Resource;
use kube::runtime::watcher;
use serde::de::DeserializeOwned;

use super::meta::{list_meta, unwrap_envelope};
use super::wire::{Fields, WireError};
use super::{Event, Frames, PROTOBUF, watch_event};

/// Server-side timeout of one watch request (kube's default).
const WATCH_TIMEOUT_SECONDS: u32 = 290;
const BACKOFF_MIN: Duration = Duration::from_millis(800);
const BACKOFF_MAX: Duration = Duration::from_secs(30);

/// What to list and watch, and how to decode one protobuf object of it.
pub(crate) struct Source<K> {
    pub(crate) client: Client,
    /// The Accept header (see `informers::accept_header`).
    pub(crate) accept: String,
    /// The collection's path, e.g. `/api/v1/nodes`.
    pub(crate) path: &'static str,
    pub(crate) page_size: u32,
    pub(crate) decode: fn(&[u8]) -> super::wire::Result<K>,
}

/// Why a request or a stream failed.
#[derive(Debug)]
enum Failure {
    /// The version asked for is gone (410): list again.
    Gone,
    Other(String),
}

impl<E: std::fmt::Display> From<E> for Failure {
    fn from(e: E) -> Self {
        Failure::Other(e.to_string())
    }
}

enum Phase {
    /// Listing; `continue_token` of the next page, None for the first.
    List { continue_token: Option<String> },
    /// Watching from `resource_version`; `body` once the request has answered.
    Watch {
        resource_version: String,
        body: Option<WatchBody>,
    },
}

struct WatchBody {
    body: kube::client::Body,
    protobuf: bool,
    frames: Frames,
    /// JSON: the bytes after the last newline.
    line: Vec<u8>,
}

/// The items of one protobuf list page not yet decoded.
struct LazyItems {
    raw: Bytes,
}

struct State<K> {
    source: Source<K>,
    phase: Phase,
    lazy: Option<LazyItems>,
    queue: VecDeque<watcher::Event<K>>,
    backoff: Duration,
    /// The list's resourceVersion, taken from its first page.
    list_version: String,
}

/// The events of `source`, forever (the informer task is aborted to stop it).
pub(crate) fn events<K>(source: Source<K>) -> impl Stream<Item = watcher::Event<K>> + Send
where
    K: Resource + DeserializeOwned + Clone + Debug + Send + Sync + 'static,
    K::DynamicType: Default,
{
    let state = State {
        source,
        phase: Phase::List {
            continue_token: None,
        },
        lazy: None,
        queue: VecDeque::new(),
        backoff: BACKOFF_MIN,
        list_version: String::new(),
    };
    futures::stream::unfold(state, |mut s| async move {
        let e = s.next().await;
        Some((e, s))
    })
}

impl<K> State<K>
where
    K: Resource + DeserializeOwned + Clone + Debug + Send + Sync + 'static,
    K::DynamicType: Default,
{
    async fn next(&mut self) -> watcher::Event<K> {
        loop {
            if let Some(lazy) = &mut self.lazy {
                match lazy.next(self.source.decode) {
                    Ok(Some(o)) => return watcher::Event::InitApply(o),
                    Ok(None) => self.lazy = None,
                    Err(e) => {
                        self.lazy = None;
                        self.fail(Failure::from(e), true).await;
                        continue;
                    }
                }
            }
            if let Some(e) = self.queue.pop_front() {
                return e;
            }
            if let Err(f) = self.step().await {
                let relist = matches!(self.phase, Phase::List { .. });
                self.fail(f, relist).await;
            }
        }
    }

    /// Logs a failure and waits; then lists again (`relist`, or a 410) or watches again
    /// from the last version.
    async fn fail(&mut self, f: Failure, relist: bool) {
        let kind = K::kind(&Default::default()).to_string();
        match &f {
            Failure::Gone => {
                tracing::debug!(%kind, "resource version gone; listing again");
            }
            Failure::Other(e) => {
                tracing::warn!(%kind, error = %e, "watch failed; retrying");
                tokio::time::sleep(self.backoff).await;
                self.backoff = (self.backoff * 2).min(BACKOFF_MAX);
            }
        }
        if relist || matches!(f, Failure::Gone) {
            self.queue.clear();
            self.phase = Phase::List {
                continue_token: None,
            };
        } else if let Phase::Watch { body, .. } = &mut self.phase {
            *body = None;
        }
    }

    /// One request, or one chunk of a watch.
    async fn step(&mut self) -> Result<(), Failure> {
        match &mut self.phase {
            Phase::List { continue_token } => {
                let first = continue_token.is_none();
                let query = match continue_token {
                    None => format!("resourceVersion=0&limit={}", self.source.page_size),
                    Some(c) => format!("limit={}&continue={c}", self.source.page_size),
                };
                let (protobuf, body) = get(&self.source, &query).await?;
                let body = body.collect().await?.to_bytes();
                if first {
                    self.queue.push_back(watcher::Event::Init);
                }
                let next = if protobuf {
                    let (rv, next, raw) = proto_page(&body)?;
                    self.lazy = Some(LazyItems { raw });
                    if first {
                        self.list_version = rv;
                    }
                    next
                } else {
                    let list: kube::core::ObjectList<K> = serde_json::from_slice(&body)?;
                    if first {
                        self.list_version = list.metadata.resource_version.unwrap_or_default();
                    }
                    self.queue
                        .extend(list.items.into_iter().map(watcher::Event::InitApply));
                    list.metadata.continue_.filter(|c| !c.is_empty())
                };
                self.backoff = BACKOFF_MIN;
                self.phase = match next {
                    Some(c) => Phase::List {
                        continue_token: Some(c),
                    },
                    None => {
                        self.queue.push_back(watcher::Event::InitDone);
                        Phase::Watch {
                            resource_version: std::mem::take(&mut self.list_version),
                            body: None,
                        }
                    }
                };
                Ok(())
            }
            Phase::Watch {
                resource_version,
                body: None,
            } => {
                let query = format!(
                    "watch=true&resourceVersion={resource_version}&allowWatchBookmarks=true&timeoutSeconds={WATCH_TIMEOUT_SECONDS}"
                );
                let (protobuf, body) = get(&self.source, &query).await?;
                if let Phase::Watch { body: b, .. } = &mut self.phase {
                    *b = Some(WatchBody {
                        body,
                        protobuf,
                        frames: Frames::default(),
                        line: Vec::new(),
                    });
                }
                Ok(())
            }
            Phase::Watch {
                resource_version,
                body: Some(w),
            } => {
                let Some(frame) = w.body.frame().await else {
                    // The server ended the watch (its timeout): watch again from here.
                    self.phase = Phase::Watch {
                        resource_version: std::mem::take(resource_version),
                        body: None,
                    };
                    return Ok(());
                };
                let Ok(data) = frame?.into_data() else {
                    return Ok(()); // trailers
                };
                let mut events = Vec::new();
                if w.protobuf {
                    w.frames.push(&data);
                    while let Some(f) = w.frames.next_frame()? {
                        events.push(watch_event(f, self.source.decode)?);
                    }
                } else {
                    w.line.extend_from_slice(&data);
                    while let Some(nl) = w.line.iter().position(|&b| b == b'\n') {
                        let line: Vec<u8> = w.line.drain(..=nl).collect();
                        if line.iter().all(u8::is_ascii_whitespace) {
                            continue;
                        }
                        events.push(json_event(&line)?);
                    }
                }
                for e in events {
                    match e {
                        Event::Added(o) | Event::Modified(o) => {
                            *resource_version = version_of(&o);
                            self.queue.push_back(watcher::Event::Apply(o));
                        }
                        Event::Deleted(o) => {
                            *resource_version = version_of(&o);
                            self.queue.push_back(watcher::Event::Delete(o));
                        }
                        Event::Bookmark(rv) => *resource_version = rv,
                        Event::Error(410, ..) => return Err(Failure::Gone),
                        Event::Error(code, reason, message) => {
                            return Err(Failure::Other(format!(
                                "watch error {code} {reason}: {message}"
                            )));
                        }
                    }
                    self.backoff = BACKOFF_MIN;
                }
                Ok(())
            }
        }
    }
}

/// GET `path?query`: whether the answer is protobuf, and its body; a non-2xx answer is a
/// failure (410 as [`Failure::Gone`]).
async fn get<K>(source: &Source<K>, query: &str) -> Result<(bool, kube::client::Body), Failure> {
    let path = source.path;
    {
        let req = http::Request::get(format!("{path}?{query}"))
            .header(http::header::ACCEPT, &source.accept)
            .body(kube::client::Body::empty())?;
        let resp = source.client.send(req).await?;
        let status = resp.status();
        if status == http::StatusCode::GONE {
            return Err(Failure::Gone);
        }
        let protobuf = resp
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with(PROTOBUF));
        if !status.is_success() {
            let body = resp.into_body().collect().await?.to_bytes();
            let text = String::from_utf8_lossy(&body[..body.len().min(512)]).into_owned();
            return Err(Failure::Other(format!("{path} answered {status}: {text}")));
        }
        Ok((protobuf, resp.into_body()))
    }
}

fn version_of<K: Resource>(o: &K) -> String {
    o.meta().resource_version.clone().unwrap_or_default()
}

/// A protobuf list page: its resourceVersion, continue token, and the list message's bytes
/// (items still encoded).
fn proto_page(body: &Bytes) -> Result<(String, Option<String>, Bytes), WireError> {
    let (_, raw) = unwrap_envelope(body)?;
    let mut rv = String::new();
    let mut next = None;
    for f in Fields::new(raw) {
        if let (1, v) = f? {
            (rv, next) = list_meta(v.bytes("metadata")?)?;
        }
    }
    Ok((rv, next, body.slice_ref(raw)))
}

impl LazyItems {
    /// The next item (field 2) of the list message, decoded.
    fn next<K>(
        &mut self,
        decode: fn(&[u8]) -> super::wire::Result<K>,
    ) -> Result<Option<K>, WireError> {
        loop {
            let mut fields = Fields::new(&self.raw);
            let Some(f) = fields.next() else {
                return Ok(None);
            };
            let (number, value) = f?;
            let consumed = self.raw.len() - fields.remaining();
            let item = match (number, value) {
                (2, v) => Some(decode(v.bytes("items")?)?),
                _ => None,
            };
            self.raw = self.raw.slice(consumed..);
            if item.is_some() {
                return Ok(item);
            }
        }
    }
}

/// One line of a JSON watch stream.
fn json_event<K: DeserializeOwned>(line: &[u8]) -> Result<Event<K>, Failure> {
    Ok(
        match serde_json::from_slice::<kube::core::WatchEvent<K>>(line)? {
            kube::core::WatchEvent::Added(o) => Event::Added(o),
            kube::core::WatchEvent::Modified(o) => Event::Modified(o),
            kube::core::WatchEvent::Deleted(o) => Event::Deleted(o),
            kube::core::WatchEvent::Bookmark(b) => Event::Bookmark(b.metadata.resource_version),
            kube::core::WatchEvent::Error(s) => {
                Event::Error(s.code as i32, s.reason.clone(), s.message.clone())
            }
        },
    )
}
