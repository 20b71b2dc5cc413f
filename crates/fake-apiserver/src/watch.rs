//! WATCH: the stream of events a client gets after a resourceVersion. Every write is
//! appended to the store's log and broadcast; a watch replays the log after the
//! resourceVersion asked for, then follows the broadcast, shows each event as the
//! watcher's [`Filter`] sees it (objects that stop matching arrive as DELETED), sends a
//! BOOKMARK when asked, answers `410 Expired` to a resume from before the compaction
//! point, and ends when the server expires its watches (or the watcher falls behind).

use std::collections::BTreeMap;
use std::convert::Infallible;

use axum::body::{Body, Bytes};
use axum::response::Response;
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::sync::broadcast;

use crate::selectors::Filter;
use crate::store::{Inner, resource};

/// One entry of the watch log: a write, at its resourceVersion.
#[derive(Clone, Debug)]
pub(crate) struct WatchEvent {
    pub(crate) rv: u64,
    pub(crate) collection: String,
    pub(crate) type_: &'static str,
    pub(crate) object: Value,
    /// The object before a MODIFIED, for field-selector transitions.
    pub(crate) old: Option<Value>,
}

impl Filter {
    /// How a watcher with this filter sees the event, if at all.
    fn view(&self, e: &WatchEvent) -> Option<&'static str> {
        let now = self.matches(&e.object);
        match e.type_ {
            "MODIFIED" => {
                let before = e.old.as_ref().is_some_and(|o| self.matches(o));
                match (before, now) {
                    (true, true) => Some("MODIFIED"),
                    (true, false) => Some("DELETED"),
                    (false, true) => Some("ADDED"),
                    (false, false) => None,
                }
            }
            t => now.then_some(t),
        }
    }
}

/// A WATCH of `collection` (`resourceVersion`, `allowWatchBookmarks` from `params`): a
/// streaming response of one JSON event per line.
pub(crate) fn watch(
    inner: &Inner,
    collection: &'static str,
    filter: Filter,
    params: &BTreeMap<String, String>,
    protobuf: bool,
) -> Response {
    let r = resource(collection);
    let content_type = if protobuf {
        crate::protobuf::WATCH_CONTENT_TYPE
    } else {
        "application/json"
    };
    // One event as the client asked: a JSON line, or a protobuf frame. An object the fake
    // cannot encode becomes an ERROR event naming the field, never a silent omission.
    let encode = move |type_: &str, object: &serde_json::Value| -> Bytes {
        if !protobuf {
            let mut s = json!({"type": type_, "object": object}).to_string();
            s.push('\n');
            return Bytes::from(s);
        }
        let frame = crate::protobuf::watch_frame(collection, type_, object).unwrap_or_else(|| {
            let why = crate::protobuf::object(collection, object)
                .err()
                .unwrap_or_default();
            let status = json!({"kind": "Status", "status": "Failure", "code": 500,
                "reason": "InternalError",
                "message": format!("fake API server: no protobuf encoding for {why}")});
            crate::protobuf::watch_frame(collection, "ERROR", &status).unwrap_or_default()
        });
        Bytes::from(frame)
    };
    let since: u64 = params
        .get("resourceVersion")
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let bookmarks = params.get("allowWatchBookmarks").map(String::as_str) == Some("true");
    // Subscribe before reading the log so nothing falls between the two.
    let rx = inner.tx.subscribe();
    let mut gen_rx = inner.generation.subscribe();
    gen_rx.mark_unchanged();
    let (backlog, now) = {
        let mut st = inner.store.lock().unwrap();
        if protobuf {
            *st.protobuf_served
                .entry(collection.to_string())
                .or_default() += 1;
        }
        if since < st.compacted {
            // What a real API server sends: HTTP 200, then an ERROR event with 410.
            let status = json!({
                "apiVersion": "v1", "kind": "Status", "status": "Failure", "code": 410,
                "reason": "Expired",
                "message": format!("too old resource version: {since} ({})", st.compacted),
            });
            return Response::builder()
                .header("content-type", content_type)
                .body(Body::from(encode("ERROR", &status)))
                .unwrap();
        }
        let backlog: Vec<WatchEvent> = st
            .log
            .iter()
            .filter(|e| e.rv > since && e.collection == collection)
            .cloned()
            .collect();
        (backlog, st.rv)
    };
    let last = backlog.last().map_or(since, |e| e.rv);
    let line = move |e: &WatchEvent| -> Option<Result<Bytes, Infallible>> {
        let type_ = filter.view(e)?;
        Some(Ok(encode(type_, &e.object)))
    };
    let mut first: Vec<Result<Bytes, Infallible>> = backlog.iter().filter_map(&line).collect();
    if bookmarks {
        // A bookmark after the backlog: the client may resume from `now` even if none of
        // the events since matched its selector.
        let object = json!({
            "apiVersion": r.api_version(), "kind": r.kind,
            "metadata": {"resourceVersion": now.to_string()},
        });
        first.push(Ok(encode("BOOKMARK", &object)));
    }
    let live = futures::stream::unfold((rx, gen_rx), move |(mut rx, mut gen_rx)| async move {
        loop {
            tokio::select! {
                // expire_watches(): end the stream, as a dropped connection would.
                _ = gen_rx.changed() => return None,
                r = rx.recv() => match r {
                    Ok(e) if e.collection == collection && e.rv > last => {
                        return Some((e, (rx, gen_rx)));
                    }
                    Ok(_) => continue,
                    // Events were dropped for this slow watcher: end the stream (as a real
                    // API server ends a watch that falls behind) so the client resumes from
                    // its last resourceVersion and gets the missed events from the log.
                    Err(broadcast::error::RecvError::Lagged(_)) => return None,
                    Err(broadcast::error::RecvError::Closed) => return None,
                },
            }
        }
    })
    .filter_map(move |e| futures::future::ready(line(&e)));
    Response::builder()
        .header("content-type", content_type)
        .body(Body::from_stream(futures::stream::iter(first).chain(live)))
        .unwrap()
}
